import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { Client } from 'pg';
import { KeyEncryptionKey, kekIdOf, LocalKeyProvider } from '@mission/crypto';
import { RecordCipher } from '@mission/persistence';
import { openMissionDatabase, requestFingerprint } from '@mission/service-mission';
import { runWithTenant } from '@mission/tenant-context';
import { call, clientCredentialsToken, eventually, politeCall, waitForMission } from '../support/api-client';
import { REPO_ROOT } from '../support/processes';
import { DistributedStack, startDistributedStack } from '../support/distributed-stack';
import { kafkaAccessFromEnv } from '../support/kafka-access';

/** The broker's log directory, when this run started the broker itself (see the global setup). */
const KAFKA_DATA_DIR = process.env.MS_TEST_STARTED_KAFKA === '1' && process.env.KAFKA_STATE_DIR ? path.join(process.env.KAFKA_STATE_DIR, 'data') : undefined;
const itOnOwnBroker = KAFKA_DATA_DIR ? it : it.skip;

/** The broker removes the directories of deleted topics (reply topics of stopped processes) while we walk. */
function goneIsEmpty<T>(empty: T): (error: NodeJS.ErrnoException) => T {
  return (error) => {
    if (error.code === 'ENOENT') return empty;
    throw error;
  };
}

async function filesUnder(directory: string): Promise<string[]> {
  const entries = await readdir(directory, { withFileTypes: true }).catch(goneIsEmpty([]));
  const nested = await Promise.all(entries.map((entry) => (entry.isDirectory() ? filesUnder(path.join(directory, entry.name)) : [path.join(directory, entry.name)])));
  return nested.flat();
}

/**
 * Tenant payloads are ciphertext wherever they rest outside the service that owns them: in
 * Kafka's log segments and in PostgreSQL, while the API hands them back intact to their tenant.
 */
describe('End-to-end payload encryption in the distributed deployment', () => {
  let stack: DistributedStack;
  let db: Client;
  const tenants: Array<{ id: string; token: string }> = [];
  const canary = `canary${randomUUID().replaceAll('-', '')}`;
  const canaries = {
    objective: `${canary}objective`,
    input: `${canary}input`,
    approvalTitle: `${canary}approvaltitle`,
    comment: `${canary}comment`,
    documentTitle: `${canary}documenttitle`,
    document: `${canary}document`,
  };
  let missionId = '';
  let hitId = '';
  const idempotencyKey = `sealed-${randomUUID()}`;
  const missionBody = {
    title: 'Sealed mission',
    objective: `Summarise ${canaries.objective}`,
    input: { note: canaries.input },
    steps: [
      { type: 'brain.query', query: 'ferrite resonator microwave' },
      { type: 'approval', title: canaries.approvalTitle },
    ],
  };
  /** What a bare hash of the submission would have stored (the service fingerprints the body as sent). */
  const fingerprint = requestFingerprint(missionBody);

  beforeAll(async () => {
    stack = await startDistributedStack(kafkaAccessFromEnv(), process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
    db = new Client({ connectionString: stack.database.url });
    await db.connect();
    const admin = (await clientCredentialsToken(stack.issuer, stack.admin.clientId, stack.admin.clientSecret)).access_token;
    for (const name of ['Sealed A', 'Sealed B']) {
      const created = await call(stack.gatewayUrl, 'POST', '/admin/tenants', { token: admin, body: { name, tier: 'business' } });
      tenants.push({ id: created.body.id, token: (await clientCredentialsToken(stack.issuer, created.body.client.clientId, created.body.client.clientSecret)).access_token });
    }
    const [a] = tenants;

    // A document, then a mission that finds it, waits for an approval and is approved with a comment.
    const document = await call(stack.gatewayUrl, 'POST', '/api/brain/documents', {
      token: a.token,
      body: { title: canaries.documentTitle, content: `The ferrite resonator notes say ${canaries.document} about microwave losses.` },
    });
    expect(document.status).toBe(201);
    const submitted = await call(stack.gatewayUrl, 'POST', '/api/missions', { token: a.token, body: missionBody, headers: { 'idempotency-key': idempotencyKey } });
    expect(submitted.status).toBe(202);
    missionId = submitted.body.id;
    hitId = await eventually(async () => {
      const mission = await politeCall(stack.gatewayUrl, 'GET', `/api/missions/${missionId}`, { token: a.token });
      return mission.body.status === 'awaiting_approval' ? (mission.body.steps[1].hitId as string) : undefined;
    }, 'the mission to wait for its approval');
    const approved = await call(stack.gatewayUrl, 'POST', `/api/hit/${hitId}/approve`, { token: a.token, body: { comment: canaries.comment } });
    expect(approved.status).toBe(200);
    expect((await waitForMission(stack.gatewayUrl, a.token, missionId)).status).toBe('succeeded');
  }, 240_000);

  afterAll(async () => {
    await db?.end();
    if (stack) expect(await stack.stop()).toEqual([]);
  }, 120_000);

  it('returns every payload intact to its tenant through the API', async () => {
    const [a] = tenants;
    const mission = await call(stack.gatewayUrl, 'GET', `/api/missions/${missionId}`, { token: a.token });
    expect(mission.body.objective).toBe(`Summarise ${canaries.objective}`);
    const [found, approval] = mission.body.steps;
    expect(found.output.results[0]).toMatchObject({ title: canaries.documentTitle, text: expect.stringContaining(canaries.document) });
    expect(approval.output).toMatchObject({ decision: 'approved', comment: canaries.comment });
    const hit = await call(stack.gatewayUrl, 'GET', `/api/hit/${hitId}`, { token: a.token });
    expect(hit.body).toMatchObject({ title: canaries.approvalTitle, comment: canaries.comment, status: 'approved' });
    const query = await call(stack.gatewayUrl, 'GET', `/api/brain/query?q=${encodeURIComponent('ferrite microwave')}`, { token: a.token });
    expect(query.body.results[0].text).toContain(canaries.document);
  });

  it('leaves no payload readable in a dump of the database', () => {
    const dump = execFileSync('pg_dump', ['--no-owner', '--data-only', stack.database.url], { maxBuffer: 256 * 1024 * 1024 }).toString('utf8');
    // The dump holds the tenant's rows: it is the right database, and it is not empty.
    expect(dump).toContain(missionId);
    expect(dump).toContain(hitId);
    for (const [what, value] of Object.entries(canaries)) expect({ what, found: dump.includes(value) }).toEqual({ what, found: false });
    expect(dump).not.toContain(canary);
    expect(dump).toContain(idempotencyKey);
    expect(dump).not.toContain(fingerprint);
  });

  it('keeps an Idempotency-Key’s request fingerprint sealed, and still knows a repeat from another request', async () => {
    const [a] = tenants;
    const { rows } = await db.query(`SELECT request_hash FROM mission.idempotency_keys WHERE key = $1`, [idempotencyKey]);
    expect(rows).toHaveLength(1);
    expect(rows[0].request_hash).toMatch(/^enc1\./);
    expect(rows[0].request_hash).not.toContain(fingerprint);
    // What it seals is the service's own fingerprint of this request (so the dump check above looked for the right value).
    const dataSource = await openMissionDatabase(stack.database.url);
    try {
      const cipher = new RecordCipher('mission', new LocalKeyProvider(KeyEncryptionKey.fromBase64Url(stack.kek)));
      const opened = await runWithTenant({ tenantId: a.id }, () => cipher.open(dataSource, { table: 'idempotency_keys', id: idempotencyKey }, rows[0].request_hash));
      expect(opened).toEqual({ requestHash: fingerprint, missionId });
    } finally {
      await dataSource.destroy();
    }
    const again = await call(stack.gatewayUrl, 'POST', '/api/missions', { token: a.token, body: missionBody, headers: { 'idempotency-key': idempotencyKey } });
    expect({ status: again.status, id: again.body.id }).toEqual({ status: 202, id: missionId });
    const other = await call(stack.gatewayUrl, 'POST', '/api/missions', {
      token: a.token,
      body: { ...missionBody, title: 'Another' },
      headers: { 'idempotency-key': idempotencyKey },
    });
    expect({ status: other.status, code: other.body.code }).toEqual({ status: 422, code: 'idempotency_key_reused' });
  });

  itOnOwnBroker('leaves no payload readable in Kafka’s log segments', async () => {
    const segments = (await filesUnder(KAFKA_DATA_DIR as string)).filter((file) => file.endsWith('.log'));
    const contents = await Promise.all(segments.map((file) => readFile(file).catch(goneIsEmpty(Buffer.alloc(0)))));
    // The segments hold this mission's messages (ids travel in clear headers and keys).
    expect(contents.some((content) => content.includes(missionId))).toBe(true);
    const holding = segments.filter((_, index) => contents[index].includes(canary));
    expect(holding).toEqual([]);
  });

  it('fails loudly, with nothing of the payload, when a ciphertext is moved to another tenant’s row', async () => {
    const [a, b] = tenants;
    // Waiting for approval, not final: read from the database every time (final missions are served from memory).
    const victim = await call(stack.gatewayUrl, 'POST', '/api/missions', {
      token: b.token,
      body: { title: 'B’s own', objective: 'B’s objective', steps: [{ type: 'approval', title: 'B decides' }] },
    });
    expect(victim.status).toBe(202);
    await eventually(
      async () => ((await politeCall(stack.gatewayUrl, 'GET', `/api/missions/${victim.body.id}`, { token: b.token })).body.status === 'awaiting_approval' ? true : undefined),
      'B’s mission to wait',
    );
    // An operator with database access copies A's sealed mission over B's row.
    await db.query(`UPDATE mission.missions SET sealed = (SELECT sealed FROM mission.missions WHERE id = $1) WHERE id = $2`, [missionId, victim.body.id]);
    const read = await call(stack.gatewayUrl, 'GET', `/api/missions/${victim.body.id}`, { token: b.token });
    expect(read.status).toBe(500);
    expect(read.body.code).toBe('internal_error');
    expect(JSON.stringify(read.body)).not.toContain(canary);
    // Within A's tenant, moved to another record (a HIT item's text onto another item), it fails the same way.
    const second = await call(stack.gatewayUrl, 'POST', '/api/missions', {
      token: a.token,
      body: { title: 'Second', objective: 'o', steps: [{ type: 'approval', title: 'plain' }] },
    });
    const secondHit = await eventually(async () => {
      const mission = await politeCall(stack.gatewayUrl, 'GET', `/api/missions/${second.body.id}`, { token: a.token });
      return mission.body.status === 'awaiting_approval' ? (mission.body.steps[0].hitId as string) : undefined;
    }, 'the second mission to wait');
    await db.query(`UPDATE hit.hit_items SET sealed = (SELECT sealed FROM hit.hit_items WHERE id = $1) WHERE id = $2`, [hitId, secondHit]);
    const moved = await call(stack.gatewayUrl, 'GET', `/api/hit/${secondHit}`, { token: a.token });
    expect(moved.status).toBe(500);
    expect(JSON.stringify(moved.body)).not.toContain(canary);
    // The originals still read.
    expect((await call(stack.gatewayUrl, 'GET', `/api/missions/${missionId}`, { token: a.token })).status).toBe(200);
  }, 60_000);

  // Last: afterwards the running services' KEK no longer wraps the stored keys.
  it('re-wraps every data key under a new KEK with --rewrap-data-keys, leaving the data as it was', async () => {
    const [a] = tenants;
    const oldKek = KeyEncryptionKey.fromBase64Url(stack.kek);
    const newKek = KeyEncryptionKey.generate();
    const sealedBefore = (await db.query(`SELECT sealed FROM mission.missions WHERE id = $1`, [missionId])).rows[0].sealed as string;
    const rewrap = (env: Record<string, string>) =>
      execFileSync(process.execPath, ['-r', './tools/register.cjs', 'apps/mission-service/src/main.ts', '--rewrap-data-keys'], {
        cwd: REPO_ROOT,
        env: { ...process.env, DATABASE_URL: stack.database.url, LOG_LEVEL: 'warn', KEK_FILE: '', ...env },
        stdio: 'pipe',
      });
    // Without the old KEK nothing can be unwrapped: the command fails and changes nothing.
    expect(() => rewrap({ KEK: newKek.toBase64Url(), KEK_PREVIOUS: '' })).toThrow(/Unknown key-encryption key/);
    expect((await db.query(`SELECT DISTINCT kek_id FROM mission.data_keys`)).rows.map((row) => row.kek_id)).toEqual([kekIdOf(oldKek)]);
    rewrap({ KEK: newKek.toBase64Url(), KEK_PREVIOUS: oldKek.toBase64Url() });
    const kekIds = (await db.query(`SELECT DISTINCT kek_id FROM mission.data_keys`)).rows.map((row) => row.kek_id);
    expect(kekIds).toEqual([kekIdOf(newKek)]);
    expect((await db.query(`SELECT sealed FROM mission.missions WHERE id = $1`, [missionId])).rows[0].sealed).toBe(sealedBefore);

    // The new KEK alone opens the mission; the old one alone no longer does.
    const dataSource = await openMissionDatabase(stack.database.url);
    try {
      const open = (kek: KeyEncryptionKey) =>
        runWithTenant({ tenantId: a.id }, () =>
          new RecordCipher('mission', new LocalKeyProvider(kek)).open<{ objective: string }>(dataSource, { table: 'missions', id: missionId }, sealedBefore),
        );
      await expect(open(newKek)).resolves.toMatchObject({ objective: `Summarise ${canaries.objective}` });
      await expect(open(oldKek)).rejects.toThrow(/Unknown key-encryption key/);
    } finally {
      await dataSource.destroy();
    }
  }, 120_000);
});
