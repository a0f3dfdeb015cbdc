import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { Kafka, logLevel } from 'kafkajs';
import path from 'node:path';
import { Client } from 'pg';
import { MessageTypes, Topics } from '@mission/contracts';
import { KafkaBus } from '@mission/messaging';
import { resolvePayloadKeys, sealedPayloads } from '@mission/runtime';
import { MISSION_HIT_EVENTS_GROUP } from '@mission/service-mission';
import { runWithTenant } from '@mission/tenant-context';
import { call, clientCredentialsToken, politeCall } from '../support/api-client';
import { DistributedStack, startDistributedStack } from '../support/distributed-stack';
import { REPO_ROOT } from '../support/processes';
import { kafkaAccessFromEnv, kafkaClientOptions } from '../support/kafka-access';
import { openEventStream } from '../support/event-stream-client';
import { signatureIsValid, startWebhookReceiver } from '../support/webhook-receiver';

const FINAL = ['succeeded', 'failed', 'rejected', 'cancelled'];
/** Stopping Kafka is only done to a broker this run started itself (see the global setup), never to one it was given. */
const itWithOwnBroker = process.env.MS_TEST_STARTED_KAFKA === '1' ? it : it.skip;
const silent = { warn: () => undefined, error: () => undefined };
/** The apps' shutdown grace period (onShutdownSignal's default): a stop that takes it exits 1. */
const GRACE_MS = 25_000;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Faults against the separate-process deployment: a crashed mission-service, duplicated Kafka
 * messages and a Kafka outage must not lose, repeat or strand any accepted mission.
 */
describe('Fault tolerance of the distributed deployment', () => {
  const kafka = kafkaAccessFromEnv();
  let stack: DistributedStack;
  let db: Client;
  let tenant: { id: string; token: string };
  // The test plays a misbehaving broker and producer: it signs in as the administrator.
  const rawKafka = new Kafka({ ...kafkaClientOptions(kafka), clientId: 'fault-test-raw', logLevel: logLevel.NOTHING });

  async function mission(id: string): Promise<any> {
    const response = await politeCall(stack.gatewayUrl, 'GET', `/api/missions/${id}`, { token: tenant.token });
    if (response.status !== 200) throw new Error(`GET mission ${id}: ${response.status} ${JSON.stringify(response.body)}`);
    return response.body;
  }

  async function waitAll(ids: readonly string[], accept: (m: any) => boolean, what: string, timeoutMs = 90_000): Promise<any[]> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const missions = await Promise.all(ids.map(async (id) => mission(id).catch(() => undefined)));
      if (missions.every((m) => m && accept(m))) return missions;
      if (Date.now() > deadline) {
        const stuck = missions.filter((m) => !m || !accept(m)).map((m) => (m ? `${m.id}:${m.status}` : 'unreadable'));
        throw new Error(`Timed out waiting for ${what}; not there: ${stuck.slice(0, 10).join(', ')} (${stuck.length})`);
      }
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  async function submit(steps: unknown[], idempotencyKey?: string): Promise<{ status: number; id?: string; createdAt?: string }> {
    const headers: Record<string, string> = idempotencyKey ? { 'idempotency-key': idempotencyKey } : {};
    const response = await call(stack.gatewayUrl, 'POST', '/api/missions', { token: tenant.token, body: { title: 'Fault test', objective: 'Survive', steps }, headers });
    return response.status === 202 ? { status: 202, id: response.body.id, createdAt: response.body.createdAt } : { status: response.status };
  }

  async function approveAll(ids: readonly string[]): Promise<void> {
    const waiting = await waitAll(ids, (m) => m.status === 'awaiting_approval', 'missions to await approval');
    for (const m of waiting) {
      const hitId = m.steps.find((s: { type: string }) => s.type === 'approval').hitId;
      const response = await call(stack.gatewayUrl, 'POST', `/api/hit/${hitId}/approve`, { token: tenant.token });
      expect(response.status).toBe(200);
    }
  }

  async function completionsPerMission(ids: readonly string[]): Promise<Map<string, number>> {
    const { rows } = await db.query(`SELECT payload->>'missionId' AS id, count(*)::int AS n FROM mission.outbox WHERE type = $1 AND payload->>'missionId' = ANY($2) GROUP BY 1`, [
      MessageTypes.missionCompleted,
      ids,
    ]);
    return new Map(rows.map((row: { id: string; n: number }) => [row.id, row.n]));
  }

  /** A record of `topic` as the broker holds it (value and headers untouched), found by its message id. */
  async function recordOf(topic: string, messageId: string): Promise<{ key: Buffer | null; value: Buffer | null; headers: Record<string, string> }> {
    const reader = rawKafka.consumer({ groupId: `fault-reader-${randomUUID()}`, maxWaitTimeInMs: 100 });
    await reader.connect();
    await reader.subscribe({ topics: [topic], fromBeginning: true });
    try {
      return await new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`No record ${messageId} on ${topic}`)), 20_000);
        void reader.run({
          eachMessage: async ({ message }) => {
            const headers = Object.fromEntries(Object.entries(message.headers ?? {}).map(([name, value]) => [name, String(value)]));
            if (headers['message-id'] !== messageId) return;
            clearTimeout(timer);
            resolve({ key: message.key, value: message.value, headers });
          },
        });
      });
    } finally {
      await reader.disconnect();
    }
  }

  /** The missions' statuses as mission-service stored them. */
  async function storedStatuses(ids: readonly string[]): Promise<Map<string, string>> {
    const { rows } = await db.query(`SELECT id, status FROM mission.missions WHERE id = ANY($1)`, [ids]);
    return new Map(rows.map((row: { id: string; status: string }) => [row.id, row.status]));
  }

  const countBy = (values: Iterable<string>): Record<string, number> => {
    const counts: Record<string, number> = {};
    for (const value of values) counts[value] = (counts[value] ?? 0) + 1;
    return counts;
  };

  /**
   * A document upload the test holds open: headers and the start of the body go out now, the rest
   * only when `finish` is called (spread over `overMs`). The gateway has it in hand, unanswered,
   * for as long as the test likes: a long request.
   */
  function heldUpload(title: string): { finish(overMs: number): Promise<{ status: number; body: any }> } {
    const head = `{"title":${JSON.stringify(title)},"content":"`;
    const content = 'A passage the gateway must take in whole while it drains. '.repeat(1_000);
    const tail = '"}';
    const request = httpRequest(`${stack.gatewayUrl}/api/brain/documents`, {
      method: 'POST',
      agent: false,
      headers: { authorization: `Bearer ${tenant.token}`, 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(head + content + tail)) },
    });
    const answer = new Promise<{ status: number; body: any }>((resolve, reject) => {
      request.on('response', (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, body: text ? JSON.parse(text) : undefined }));
        response.on('error', reject);
      });
      request.on('error', reject);
    });
    answer.catch(() => undefined);
    const parts = 5;
    const size = Math.ceil(content.length / (parts + 1));
    request.write(head + content.slice(0, size));
    return {
      finish: async (overMs) => {
        for (let part = 1; part <= parts; part++) {
          await sleep(overMs / parts);
          request.write(content.slice(part * size, (part + 1) * size));
        }
        request.end(tail);
        return answer;
      },
    };
  }

  /** The fault table's row for submissions under load: what was accepted, finished once, repeated or lost. */
  async function loadReport(outcomes: readonly number[], accepted: readonly string[], done: ReadonlyArray<{ status: string }>) {
    return {
      submitted: outcomes.length,
      accepted: accepted.length,
      refused: outcomes.filter((status) => status !== 202).length,
      completed: done.filter((m) => m.status === 'succeeded').length,
      duplicated: [...(await completionsPerMission(accepted)).values()].filter((n) => n > 1).length,
      lost: accepted.length - done.filter((m) => m.status === 'succeeded').length,
    };
  }

  async function hitItemsPerMission(ids: readonly string[]): Promise<number[]> {
    const { rows } = await db.query(`SELECT mission_id, count(*)::int AS n FROM hit.hit_items WHERE mission_id = ANY($1) GROUP BY 1`, [ids]);
    return rows.map((row: { n: number }) => row.n);
  }

  beforeAll(async () => {
    stack = await startDistributedStack(kafka, process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres');
    db = new Client({ connectionString: stack.database.url });
    await db.connect();
    const adminToken = (await clientCredentialsToken(stack.issuer, stack.admin.clientId, stack.admin.clientSecret)).access_token;
    const created = await call(stack.gatewayUrl, 'POST', '/admin/tenants', { token: adminToken, body: { name: 'Faults', tier: 'enterprise', rpm: 100_000 } });
    const { clientId, clientSecret } = created.body.client;
    tenant = { id: created.body.id, token: (await clientCredentialsToken(stack.issuer, clientId, clientSecret)).access_token };
  }, 180_000);

  afterAll(async () => {
    await db?.end();
    if (stack) expect(await stack.stop()).toEqual([]);
  }, 120_000);

  it('finishes every mission exactly once after mission-service is killed mid-flight', async () => {
    const approvals = await Promise.all(Array.from({ length: 8 }, () => submit([{ type: 'brain.query' }, { type: 'approval', title: 'Go?' }, { type: 'brain.query' }])));
    const plain = await Promise.all(Array.from({ length: 12 }, () => submit([{ type: 'brain.query' }, { type: 'brain.query' }, { type: 'brain.query' }])));
    expect([...approvals, ...plain].every((r) => r.status === 202)).toBe(true);
    const approvalIds = approvals.map((r) => r.id ?? '');
    const plainIds = plain.map((r) => r.id ?? '');

    // Killed while it runs them: once a mission is running, and the statuses read while it is down
    // must show work left. A kill before the first step or after the last mission would test nothing.
    const started = Date.now();
    while (![...(await storedStatuses([...approvalIds, ...plainIds])).values()].includes('running')) {
      if (Date.now() - started > 60_000) throw new Error('mission-service did not start running the missions');
      await sleep(5);
    }
    let atKill = new Map<string, string>();
    const killed = await stack.restart('mission-service', 'SIGKILL', async () => {
      atKill = await storedStatuses([...approvalIds, ...plainIds]);
    });
    expect(killed.signal).toBe('SIGKILL');
    const inFlightAtKill = countBy(atKill.values());
    process.stdout.write(`fault report (crash): statuses when killed ${JSON.stringify(inFlightAtKill)}\n`);
    expect(atKill.size).toBe(20);
    // It had started on them, and left steps to run (not just approvals to wait for): the restarted service must pick those up.
    expect([...atKill.values()].filter((status) => status !== 'queued').length).toBeGreaterThan(0);
    expect([...atKill.values()].filter((status) => status === 'queued' || status === 'running').length).toBeGreaterThan(0);

    await approveAll(approvalIds);
    const done = await waitAll([...approvalIds, ...plainIds], (m) => FINAL.includes(m.status), 'every mission to finish');

    const report = {
      submitted: done.length,
      completed: done.filter((m) => m.status === 'succeeded').length,
      duplicated: [...(await completionsPerMission(done.map((m) => m.id))).values()].filter((n) => n > 1).length,
      lost: done.filter((m) => m.status !== 'succeeded').length,
    };
    process.stdout.write(`fault report (crash): ${JSON.stringify(report)}\n`);
    expect(report).toEqual({ submitted: 20, completed: 20, duplicated: 0, lost: 0 });
    expect(done.every((m) => m.steps.every((s: { status: string }) => s.status === 'succeeded'))).toBe(true);
    expect(await hitItemsPerMission(approvalIds)).toEqual(approvalIds.map(() => 1));
  }, 240_000);

  it('loses no accepted request when the gateway and mission-service are stopped (SIGTERM) under load', async () => {
    // Eight clients submit without pause while first mission-service, then the gateway, is
    // stopped gracefully and started again. Every 202 must become a mission that finishes; the
    // rest may fail (503 while draining, refused connections while the gateway is down). Each
    // stop must end in exit code 0 well within the grace period (restart() checks the code).
    const accepted: string[] = [];
    const outcomes: number[] = [];
    const failures: string[] = [];
    // Submissions whose connection was made but got no answer, by Idempotency-Key: refused, or cut
    // off after the work was done? (A refused connection never reached the gateway.)
    const unanswered: string[] = [];
    let submitting = true;
    const client = async (): Promise<void> => {
      while (submitting) {
        const key = randomUUID();
        const result = await submit([{ type: 'brain.query' }], key).catch((error: unknown) => {
          const cause = (error as { cause?: { code?: string; message?: string } }).cause;
          failures.push(cause?.code ?? cause?.message ?? String(error));
          if (cause?.code !== 'ECONNREFUSED') unanswered.push(key);
          return { status: 0, id: undefined };
        });
        outcomes.push(result.status);
        if (result.id) accepted.push(result.id);
        if (result.status !== 202) await new Promise((resolve) => setTimeout(resolve, 50));
      }
    };
    const clients = Array.from({ length: 8 }, () => client());
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    // Readiness turns false as soon as the drain starts, so an orchestrator stops routing to it.
    const readiness: string[] = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const seen = await fetch(`${stack.opsUrl('mission-service')}/health/ready`)
          .then(async (response) => `${response.status}${((await response.json()) as { details?: { draining?: boolean } }).details?.draining ? ' draining' : ''}`)
          .catch(() => 'refused');
        if (readiness.at(-1) !== seen) readiness.push(seen);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    })();
    // However it fails, the clients and the watcher stop: a failure must not leave them running.
    try {
      while (readiness.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(readiness[0]).toBe('200');
      const missionService = await stack.restart('mission-service', 'SIGTERM');
      watching = false;
      await watcher;
      // Up, then draining (503) from the signal until the old process is gone.
      expect(readiness.indexOf('503 draining')).toBeGreaterThan(0);
      // Drained, not cut off by the grace timer (that exits 1, which restart() refuses).
      expect(missionService.stoppedInMs).toBeLessThan(GRACE_MS - 5_000);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const beforeGateway = outcomes.length;

      // Long requests in the gateway's hands when it is told to stop: uploads whose bodies are still
      // arriving. They must be answered in full by the stopping gateway, and it must wait for them.
      const held = [1, 2, 3].map((n) => heldUpload(`Held open ${n}`));
      await sleep(300);
      const signalledAt = performance.now();
      const gatewayRestart = stack.restart('gateway', 'SIGTERM');
      gatewayRestart.catch(() => undefined);
      await sleep(300);
      const uploads = await Promise.all(held.map((upload) => upload.finish(1_500)));
      const answeredAfterMs = performance.now() - signalledAt;
      const gateway = await gatewayRestart;
      process.stdout.write(
        `fault report (graceful stops): mission-service ${Math.round(missionService.stoppedInMs)} ms, gateway ${Math.round(gateway.stoppedInMs)} ms, held uploads answered after ${Math.round(answeredAfterMs)} ms\n`,
      );
      for (const upload of uploads) expect(upload).toMatchObject({ status: 201, body: { id: expect.any(String), chunkCount: expect.any(Number) } });
      expect(gateway.stoppedInMs).toBeGreaterThanOrEqual(answeredAfterMs - 100);
      expect(gateway.stoppedInMs).toBeLessThan(GRACE_MS - 5_000);
      for (const upload of uploads) {
        const stored = await politeCall(stack.gatewayUrl, 'GET', `/api/brain/documents/${upload.body.id}`, { token: tenant.token });
        expect(stored).toMatchObject({ status: 200, body: { id: upload.body.id, chunkCount: upload.body.chunkCount } });
      }
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      submitting = false;
      await Promise.all(clients);

      // A request without an answer must have had no effect: sent again under its key, it creates
      // its mission now. Had the gateway cut off one it had already carried out, the key would give
      // back the mission stored before (README: retry with an Idempotency-Key).
      const retriedAt = Date.now();
      const retried = await Promise.all(unanswered.map((key) => submit([{ type: 'brain.query' }], key)));
      expect(retried.map((result) => result.status)).toEqual(unanswered.map(() => 202));
      const cutOff = retried.filter((result) => Date.parse(result.createdAt ?? '') < retriedAt);
      expect(cutOff).toEqual([]);
      const acceptedFirstTime = accepted.length;
      accepted.push(...retried.map((result) => result.id ?? ''));

      const done = await waitAll(accepted, (m) => FINAL.includes(m.status), 'accepted missions to finish after the restarts', 120_000);
      const report = await loadReport(outcomes, accepted, done);
      process.stdout.write(`fault report (graceful restarts): ${JSON.stringify({ ...report, unanswered: countBy(failures), unansweredSentAgain: retried.length })}\n`);
      expect(outcomes.length).toBeGreaterThan(beforeGateway);
      expect(outcomes.every((status) => status === 202 || status === 503 || status === 0)).toBe(true);
      expect(acceptedFirstTime).toBeGreaterThan(20);
      expect(report).toMatchObject({ completed: report.accepted, duplicated: 0, lost: 0 });
    } finally {
      submitting = false;
      watching = false;
      await Promise.all([...clients, watcher]);
    }
  }, 300_000);

  it('changes nothing when Kafka delivers the same messages twice', async () => {
    const first = await submit([{ type: 'approval', title: 'Twice?' }, { type: 'brain.query' }]);
    const id = first.id ?? '';
    const [waiting] = await waitAll([id], (m) => m.status === 'awaiting_approval', 'the mission to await approval');
    const hitId = waiting.steps[0].hitId;

    const bus = new KafkaBus({
      ...kafkaClientOptions(kafka),
      clientId: 'fault-test',
      logger: silent,
      codec: sealedPayloads(await resolvePayloadKeys({ KEK: stack.kek, KEK_PREVIOUS: [] })),
    });
    const rawProducer = rawKafka.producer({ allowAutoTopicCreation: false });
    await bus.start();
    await rawProducer.connect();
    try {
      // A second mission.queued for a mission already waiting must not create a second item.
      await runWithTenant({ tenantId: tenant.id }, () =>
        bus.publish(Topics.missionEvents, { type: MessageTypes.missionQueued, key: `${tenant.id}:${id}`, payload: { missionId: id } }),
      );
      const approved = await call(stack.gatewayUrl, 'POST', `/api/hit/${hitId}/approve`, { token: tenant.token });
      expect(approved.status).toBe(200);
      const [done] = await waitAll([id], (m) => FINAL.includes(m.status), 'the mission to finish');
      // Replay the very same hit.decided once more: the record as Kafka holds it, bytes and headers.
      const { rows } = await db.query(`SELECT id FROM hit.outbox WHERE type = $1 AND key = $2`, [MessageTypes.hitDecided, `${tenant.id}:${id}`]);
      expect(rows).toHaveLength(1);
      const record = await recordOf(Topics.hitEvents, rows[0].id);
      expect(record.headers['payload-encryption']).toBe('aes-256-gcm');
      const [replayed] = await rawProducer.send({ topic: Topics.hitEvents, messages: [record] });
      // Wait until mission-service's group has consumed past the replay, so "nothing changed" is a finding.
      const admin = rawKafka.admin();
      await admin.connect();
      try {
        const deadline = Date.now() + 30_000;
        for (;;) {
          const [offsets] = await admin.fetchOffsets({ groupId: MISSION_HIT_EVENTS_GROUP, topics: [Topics.hitEvents] });
          const committed = offsets?.partitions.find((partition) => partition.partition === replayed?.partition);
          if (committed && BigInt(committed.offset) > BigInt(replayed?.baseOffset ?? '0')) break;
          if (Date.now() > deadline) throw new Error('mission-service did not consume the replayed hit.decided');
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      } finally {
        await admin.disconnect();
      }
      const after = await mission(id);
      expect(after).toEqual(done);
      expect(after.status).toBe('succeeded');
      expect(await hitItemsPerMission([id])).toEqual([1]);
      expect((await completionsPerMission([id])).get(id)).toBe(1);
      const processed = await db.query(`SELECT count(*)::int AS n FROM mission.processed_messages WHERE message_id = $1`, [rows[0].id]);
      expect(processed.rows[0].n).toBe(1);
      const report = {
        submitted: 1,
        redelivered: 2,
        completed: after.status === 'succeeded' ? 1 : 0,
        duplicated: (await hitItemsPerMission([id]))[0] - 1,
        lost: after.status === 'succeeded' ? 0 : 1,
      };
      process.stdout.write(`fault report (duplicate delivery): ${JSON.stringify(report)}\n`);
    } finally {
      await rawProducer.disconnect();
      await bus.close();
    }
  }, 120_000);

  it('tells webhooks and streams of every event after notification-service is killed: nothing lost, nothing repeated on the stream', async () => {
    const receiver = await startWebhookReceiver();
    const stream = await openEventStream(stack.gatewayUrl, '/api/events?types=mission.completed', { token: tenant.token });
    try {
      const hook = await call(stack.gatewayUrl, 'POST', '/api/webhooks', { token: tenant.token, body: { url: receiver.url, events: ['mission.completed'] } });
      expect(hook.status).toBe(201);
      expect(stream.status).toBe(200);
      const submitted = await Promise.all(Array.from({ length: 10 }, () => submit([{ type: 'brain.query' }, { type: 'brain.query' }])));
      const ids = submitted.map((r) => r.id ?? '');
      // Killed while the missions run: their events wait on Kafka (and in the outboxes) until it is back.
      const killed = await stack.restart('notification-service', 'SIGKILL', async () => {
        await waitAll(ids, (m) => FINAL.includes(m.status), 'every mission to finish while notification-service is down');
      });
      expect(killed.signal).toBe('SIGKILL');
      const completedOf = (data: { missionId?: string }) => ids.includes(data.missionId ?? '');
      await receiver.waitFor(
        (all) => new Set(all.filter((d) => d.answered === 204 && completedOf(JSON.parse(d.body).data)).map((d) => d.headers['webhook-id'])).size === 10,
        60_000,
      );
      const streamed = (await stream.waitFor((events) => events.filter((event) => completedOf(event.data.data)).length >= 10, 60_000)).filter((event) =>
        completedOf(event.data.data),
      );
      const delivered = receiver.received.filter((d) => completedOf(JSON.parse(d.body).data));
      const report = {
        missions: ids.length,
        webhookEvents: new Set(delivered.map((d) => d.headers['webhook-id'])).size,
        webhookRequests: delivered.length,
        streamed: streamed.length,
        streamRepeats: streamed.length - new Set(streamed.map((event) => event.id)).size,
      };
      process.stdout.write(`fault report (notification-service killed): ${JSON.stringify(report)}\n`);
      expect(new Set(delivered.map((d) => JSON.parse(d.body).data.missionId))).toEqual(new Set(ids));
      for (const delivery of delivered) expect(signatureIsValid(delivery, hook.body.secret)).toBe(true);
      expect(report.streamed).toBe(10);
      expect(report.streamRepeats).toBe(0);
      expect(new Set(streamed.map((event) => event.data.data.missionId))).toEqual(new Set(ids));
    } finally {
      stream.close();
      await receiver.close();
    }
  }, 240_000);

  it('expires, exactly once, approvals whose deadline passed while hit-service was down', async () => {
    const stream = await openEventStream(stack.gatewayUrl, '/api/events?types=hit.expired', { token: tenant.token });
    try {
      expect(stream.status).toBe(200);
      const submitted = await Promise.all(Array.from({ length: 5 }, () => submit([{ type: 'approval', title: 'In time?', expiresIn: 2 }])));
      const ids = submitted.map((r) => r.id ?? '');
      const waiting = await waitAll(ids, (m) => m.status === 'awaiting_approval', 'missions to await approval');
      const hitIds = waiting.map((m) => m.steps[0].hitId as string);
      // Killed before the deadlines pass, and kept down past them.
      const killed = await stack.restart('hit-service', 'SIGKILL', async () => {
        await new Promise((resolve) => setTimeout(resolve, 3_000));
        expect((await Promise.all(ids.map(mission))).map((m) => m.status)).toEqual(ids.map(() => 'awaiting_approval'));
      });
      expect(killed.signal).toBe('SIGKILL');
      const ended = await waitAll(ids, (m) => FINAL.includes(m.status), 'every mission to end once hit-service is back');
      expect(ended.map((m) => [m.status, m.steps[0].output?.decision])).toEqual(ids.map(() => ['rejected', 'expired']));
      const pushed = await stream.waitFor((events) => hitIds.every((hitId) => events.some((event) => event.data.data.hitId === hitId)), 30_000);
      const report = {
        approvals: ids.length,
        expired: ended.filter((m) => m.status === 'rejected').length,
        announced: pushed.filter((event) => hitIds.includes(event.data.data.hitId)).length,
      };
      process.stdout.write(`fault report (hit-service down past deadlines): ${JSON.stringify(report)}\n`);
      const { rows } = await db.query(`SELECT payload->>'hitId' AS id, count(*)::int AS n FROM hit.outbox WHERE type = 'hit.expired' AND payload->>'hitId' = ANY($1) GROUP BY 1`, [
        hitIds,
      ]);
      expect(rows.map((row: { n: number }) => row.n)).toEqual(hitIds.map(() => 1));
      expect(report.announced).toBe(ids.length);
    } finally {
      stream.close();
    }
  }, 120_000);

  it('answers 503 with Retry-After, naming nothing internal, while a service does not answer, and serves again once it does', async () => {
    const hitService = stack.process('hit-service').child;
    expect(hitService.kill('SIGSTOP')).toBe(true);
    try {
      const response = await call(stack.gatewayUrl, 'GET', '/api/hit', { token: tenant.token });
      expect({ status: response.status, code: response.body.code }).toEqual({ status: 503, code: 'dependency_unavailable' });
      expect(response.headers.get('content-type')).toContain('application/problem+json');
      expect(Number(response.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      // The bus's own message names the topic, the message type and the timeout; the client sees none of them.
      expect(JSON.stringify(response.body)).not.toMatch(/hit\.|requests|within|\d+ ms/);
    } finally {
      hitService.kill('SIGCONT');
    }
    const deadline = Date.now() + 30_000;
    let status = 0;
    while (status !== 200 && Date.now() < deadline) {
      status = (await politeCall(stack.gatewayUrl, 'GET', '/api/hit', { token: tenant.token }, Math.max(0, deadline - Date.now()))).status;
      if (status !== 200) await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(status).toBe(200);
  }, 60_000);

  itWithOwnBroker(
    'loses no accepted mission when Kafka stops for a few seconds during submissions',
    async () => {
      const kafka = (command: string): void => {
        execFileSync(process.execPath, [path.join(REPO_ROOT, 'scripts', 'infra', 'kafka.mjs'), command], { cwd: REPO_ROOT, stdio: 'ignore' });
      };
      const accepted: string[] = [];
      const outcomes: number[] = [];
      let submitting = true;
      const submitter = (async () => {
        while (submitting) {
          const result = await submit([{ type: 'brain.query' }]).catch(() => ({ status: 0, id: undefined }));
          outcomes.push(result.status);
          if (result.id) accepted.push(result.id);
          await new Promise((resolve) => setTimeout(resolve, 50));
        }
      })();
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      kafka('stop');
      await new Promise((resolve) => setTimeout(resolve, 4_000));
      kafka('start');
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      submitting = false;
      await submitter;

      const done = await waitAll(accepted, (m) => FINAL.includes(m.status), 'accepted missions to finish after the outage', 120_000);
      const report = await loadReport(outcomes, accepted, done);
      process.stdout.write(`fault report (Kafka outage): ${JSON.stringify(report)}\n`);
      expect(report.accepted).toBeGreaterThan(0);
      expect(outcomes.every((status) => status === 202 || status === 503 || status === 0)).toBe(true);
      expect(report.completed).toBe(report.accepted);
      expect(report.duplicated).toBe(0);
      expect(report.lost).toBe(0);
    },
    300_000,
  );
});
