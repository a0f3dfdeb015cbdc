import { randomUUID } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { ErrorCode } from '@mission/contracts';
import { KeyEncryptionKey, LocalKeyProvider } from '@mission/crypto';
import { domainErrorOf } from '@mission/messaging/testing';
import { createTestDatabase, isPreparationProbe, RecordCipher, sentStatement, TestDatabase } from '@mission/persistence';
import { runWithTenant } from '@mission/tenant-context';
import { EventLog } from '../events/event-log';
import { openNotificationDatabase } from '../notification-service';
import { WebhookDispatcher } from './dispatcher';
import { WebhookTargetPolicy } from './target-policy';
import { Webhooks } from './webhooks';

const ADMIN_URL = process.env.TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const quiet = { warn: () => undefined, error: () => undefined };

/** A receiver whose answers the test holds back or releases. */
function holdingReceiver() {
  const requests: Array<{ id: string; release: (status: number) => void }> = [];
  const server = http.createServer((request, response) => {
    request.resume();
    request.on('end', () => requests.push({ id: String(request.headers['webhook-id']), release: (status) => response.writeHead(status).end() }));
  });
  return {
    requests,
    listen: () => new Promise<string>((resolve) => server.listen(0, '127.0.0.1', () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`))),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

async function until(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

describe('webhook deliveries on PostgreSQL', () => {
  let database: TestDatabase;
  let inspector: Client;
  const keys = new LocalKeyProvider(KeyEncryptionKey.generate());
  const open: DataSource[] = [];
  const receiver = holdingReceiver();
  let url: string;

  async function replica(options: { allowPrivate: boolean; timeoutMs?: number }) {
    const dataSource = await openNotificationDatabase(database.url);
    open.push(dataSource);
    const cipher = new RecordCipher('notify', keys);
    const policy = new WebhookTargetPolicy(options.allowPrivate);
    const dispatcher = new WebhookDispatcher(dataSource, cipher, policy, { retryScheduleSeconds: [1, 1], timeoutMs: options.timeoutMs ?? 2_000, pollMs: 100 }, quiet);
    const webhooks = new Webhooks(dataSource, cipher, policy, () => dispatcher.kick());
    const log = new EventLog(dataSource, cipher, {
      whileRecording: {
        read: (tenantId, eventType) => webhooks.subscribersRead(tenantId, eventType),
        write: (manager, tenantId, event, rows) => webhooks.enqueue(manager, tenantId, event, rows as Array<{ id: string }>),
      },
      afterCommit: () => dispatcher.kick(),
    });
    return { dataSource, dispatcher, webhooks, log };
  }

  const deliveryOf = async (tenantId: string, webhookId: string) =>
    (await inspector.query(`SELECT state, attempts, response_status, error FROM notify.deliveries WHERE tenant_id = $1 AND webhook_id = $2`, [tenantId, webhookId])).rows;

  beforeAll(async () => {
    database = await createTestDatabase(ADMIN_URL, 'notify_hooks');
    url = await receiver.listen();
    inspector = new Client({ connectionString: database.url });
    await inspector.connect();
  });

  afterAll(async () => {
    await receiver.close();
    await inspector?.end();
    for (const dataSource of open) if (dataSource.isInitialized) await dataSource.destroy();
    await database?.drop();
  });

  it('refuses at registration a URL that is not https or names a private address, unless private targets are allowed', async () => {
    const strict = await replica({ allowPrivate: false });
    const tenant = randomUUID();
    for (const target of ['http://hooks.example.com/', 'https://127.0.0.1/', 'https://[::ffff:169.254.169.254]/', 'https://localhost/']) {
      const error = await domainErrorOf(runWithTenant({ tenantId: tenant }, () => strict.webhooks.create({ url: target, events: ['mission.completed'] })));
      expect({ target, code: error.code }).toEqual({ target, code: ErrorCode.ValidationFailed });
    }
    const [{ count }] = (await inspector.query(`SELECT count(*)::int AS count FROM notify.webhooks WHERE tenant_id = $1`, [tenant])).rows;
    expect(count).toBe(0);
  });

  it('keeps the URL and secret sealed, and creates a delivery with the event it announces, only for the subscribed types', async () => {
    const node = await replica({ allowPrivate: true });
    const tenant = randomUUID();
    const created = await runWithTenant({ tenantId: tenant }, () => node.webhooks.create({ url, events: ['hit.decided'], description: 'secret channel' }));
    const [stored] = (await inspector.query(`SELECT sealed FROM notify.webhooks WHERE id = $1`, [created.id])).rows;
    expect(stored.sealed).toMatch(/^enc1\./);
    expect(stored.sealed).not.toContain('secret channel');
    await runWithTenant({ tenantId: tenant }, () =>
      node.log.record(randomUUID(), { type: 'mission.completed', missionId: randomUUID(), occurredAt: new Date().toISOString(), data: {} }),
    );
    expect(await deliveryOf(tenant, created.id)).toEqual([]);
    const sent = jest.spyOn(Client.prototype, 'query');
    try {
      await runWithTenant({ tenantId: tenant }, () =>
        node.log.record(randomUUID(), { type: 'hit.decided', missionId: randomUUID(), occurredAt: new Date().toISOString(), data: { decision: 'approved' } }),
      );
      // Two round trips while the tenant's position row is locked: the position with the webhooks
      // subscribed (read after it), then the event, its announcement, its delivery and the commit.
      const messages = sent.mock.calls.map(([text]) => String(text)).filter((message) => !isPreparationProbe(message));
      expect(messages).toHaveLength(2);
      expect(messages[0]).toMatch(new RegExp(`${sentStatement('INSERT INTO notify\\.positions ')}.*;\\n${sentStatement('SELECT id FROM notify\\.webhooks ')}`, 's'));
      expect(messages[1]).toMatch(
        new RegExp(
          `^${sentStatement('INSERT INTO notify\\.events ')}.*${sentStatement('INSERT INTO "notify"\\.outbox ')}.*${sentStatement('INSERT INTO notify\\.deliveries ')}.*;\\nCOMMIT$`,
          's',
        ),
      );
    } finally {
      sent.mockRestore();
    }
    expect(await deliveryOf(tenant, created.id)).toEqual([{ state: 'pending', attempts: 0, response_status: null, error: null }]);
    const [delivery] = (await inspector.query(`SELECT payload FROM notify.deliveries WHERE webhook_id = $1`, [created.id])).rows;
    expect(delivery.payload).toMatch(/^enc1\./);
    await runWithTenant({ tenantId: tenant }, () => node.webhooks.delete(created.id));
  });

  it('lets a webhook deleted while an event is recorded wait for it: the event is recorded, and its delivery goes with the webhook', async () => {
    const node = await replica({ allowPrivate: true });
    const tenant = randomUUID();
    const hook = await runWithTenant({ tenantId: tenant }, () => node.webhooks.create({ url, events: ['mission.completed'] }));
    let deletion: Promise<unknown> | undefined;
    let deleted = false;
    const log = new EventLog(node.dataSource, new RecordCipher('notify', keys), {
      whileRecording: {
        read: (tenantId, eventType) => node.webhooks.subscribersRead(tenantId, eventType),
        write: async (manager, tenantId, event, rows) => {
          // Between the lookup and the deliveries' insert, the webhook's deletion starts, and
          // waits for the recording's lock (or, were there none, ends at once).
          deletion = runWithTenant({ tenantId: tenant }, () => node.webhooks.delete(hook.id)).finally(() => (deleted = true));
          await until(
            async () =>
              deleted ||
              (await inspector.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM notify.webhooks%FOR UPDATE%'`)).rows[0]
                .n > 0,
            'the deletion to wait or end',
          );
          return node.webhooks.enqueue(manager, tenantId, event, rows as Array<{ id: string }>);
        },
      },
    });
    const recorded = await runWithTenant({ tenantId: tenant }, () =>
      log.record(randomUUID(), { type: 'mission.completed', missionId: randomUUID(), occurredAt: new Date().toISOString(), data: {} }),
    );
    expect(recorded?.type).toBe('mission.completed');
    expect(deleted).toBe(false);
    await deletion;
    expect((await inspector.query(`SELECT count(*)::int AS n FROM notify.webhooks WHERE id = $1`, [hook.id])).rows[0].n).toBe(0);
    expect(await deliveryOf(tenant, hook.id)).toEqual([]);
  });

  it('loses no delivery when a replica dies mid-attempt: another takes it up once the lease ends, under the same webhook-id', async () => {
    const first = await replica({ allowPrivate: true, timeoutMs: 300 });
    const second = await replica({ allowPrivate: true, timeoutMs: 300 });
    const tenant = randomUUID();
    const hook = await runWithTenant({ tenantId: tenant }, () => first.webhooks.create({ url, events: ['mission.completed'] }));
    receiver.requests.length = 0;
    first.dispatcher.start();
    const recorded = await runWithTenant({ tenantId: tenant }, () =>
      first.log.record(randomUUID(), { type: 'mission.completed', missionId: randomUUID(), occurredAt: new Date().toISOString(), data: { status: 'succeeded' } }),
    );
    await until(() => receiver.requests.length === 1, 'the first attempt');
    // The replica dies with the request out: it never learns the answer, nor records one.
    await first.dataSource.destroy();
    receiver.requests[0]?.release(204);
    expect(await deliveryOf(tenant, hook.id)).toEqual([{ state: 'pending', attempts: 1, response_status: null, error: null }]);
    second.dispatcher.start();
    await until(() => receiver.requests.length === 2, 'the attempt of the other replica once the lease ended');
    receiver.requests[1]?.release(204);
    await until(async () => (await deliveryOf(tenant, hook.id))[0]?.state === 'succeeded', 'the delivery to succeed');
    expect(receiver.requests.map((request) => request.id)).toEqual([recorded?.id, recorded?.id]);
    expect(await deliveryOf(tenant, hook.id)).toEqual([{ state: 'succeeded', attempts: 2, response_status: 204, error: null }]);
    await second.dispatcher.stop();
    await first.dispatcher.stop();
  });

  it('gives up after the last retry of the schedule, and keeps the last answer', async () => {
    const node = await replica({ allowPrivate: true, timeoutMs: 2_000 });
    const tenant = randomUUID();
    const hook = await runWithTenant({ tenantId: tenant }, () => node.webhooks.create({ url, events: ['hit.created'] }));
    receiver.requests.length = 0;
    node.dispatcher.start();
    await runWithTenant({ tenantId: tenant }, () =>
      node.log.record(randomUUID(), { type: 'hit.created', missionId: randomUUID(), occurredAt: new Date().toISOString(), data: {} }),
    );
    for (let attempt = 1; attempt <= 3; attempt++) {
      await until(() => receiver.requests.length === attempt, `attempt ${attempt}`);
      receiver.requests[attempt - 1]?.release(500);
    }
    await until(async () => (await deliveryOf(tenant, hook.id))[0]?.state === 'failed', 'the delivery to fail for good');
    expect(await deliveryOf(tenant, hook.id)).toEqual([{ state: 'failed', attempts: 3, response_status: 500, error: 'answered 500' }]);
    const page = await runWithTenant({ tenantId: tenant }, () => node.webhooks.deliveries(hook.id, 10));
    expect(page.items).toEqual([expect.objectContaining({ attempt: 3, status: 'failed', responseStatus: 500, eventType: 'hit.created' })]);
    await node.dispatcher.stop();
  });

  it("lets no tenant's slow endpoint hold up another tenant's deliveries to the same host: every webhook of a shared receiver gets a connection", async () => {
    const node = await replica({ allowPrivate: true, timeoutMs: 10_000 });
    const held: Array<() => void> = [];
    const served: string[] = [];
    // One receiver host for everyone: its /slow path answers only when the test lets it, /fast at once.
    const shared = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => {
        if (request.url?.startsWith('/slow')) held.push(() => response.writeHead(204).end());
        else {
          served.push(String(request.headers['webhook-id']));
          response.writeHead(204).end();
        }
      });
    });
    await new Promise<void>((resolve) => shared.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(shared.address() as AddressInfo).port}`;
    try {
      // More slow endpoints than the eight connections per host the agents used to allow.
      const slowTenants = Array.from({ length: 9 }, () => randomUUID());
      for (const [index, tenant] of slowTenants.entries()) {
        await runWithTenant({ tenantId: tenant }, () => node.webhooks.create({ url: `${base}/slow?n=${index}`, events: ['hit.created'] }));
      }
      const fastTenant = randomUUID();
      const quick = await runWithTenant({ tenantId: fastTenant }, () => node.webhooks.create({ url: `${base}/fast`, events: ['hit.created'] }));
      node.dispatcher.start();
      for (const tenant of slowTenants) {
        await runWithTenant({ tenantId: tenant }, () =>
          node.log.record(randomUUID(), { type: 'hit.created', missionId: randomUUID(), occurredAt: new Date().toISOString(), data: {} }),
        );
      }
      // Each tenant's delivery reaches the receiver while the others are held (the ninth used to wait for a connection until the first timed out).
      await until(() => held.length === slowTenants.length, 'every slow endpoint to hold its delivery', 5_000);
      const recorded = await runWithTenant({ tenantId: fastTenant }, () =>
        node.log.record(randomUUID(), { type: 'hit.created', missionId: randomUUID(), occurredAt: new Date().toISOString(), data: {} }),
      );
      // Well within the 10 s timeout the held attempts are still running on.
      await until(async () => (await deliveryOf(fastTenant, quick.id))[0]?.state === 'succeeded', 'the other tenant to be served beside the held ones', 5_000);
      expect(served).toEqual([recorded?.id]);
      expect(held).toHaveLength(slowTenants.length);
    } finally {
      for (const release of held) release();
      await node.dispatcher.stop();
      shared.closeAllConnections();
      shared.close();
    }
  });

  it('lets a slow endpoint hold no more than its one delivery at a time: another webhook is served meanwhile', async () => {
    const node = await replica({ allowPrivate: true, timeoutMs: 5_000 });
    const fast = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => response.writeHead(204).end());
    });
    await new Promise<void>((resolve) => fast.listen(0, '127.0.0.1', resolve));
    try {
      const slowTenant = randomUUID();
      const fastTenant = randomUUID();
      await runWithTenant({ tenantId: slowTenant }, () => node.webhooks.create({ url, events: ['hit.created'] }));
      const quick = await runWithTenant({ tenantId: fastTenant }, () =>
        node.webhooks.create({ url: `http://127.0.0.1:${(fast.address() as AddressInfo).port}/`, events: ['hit.created'] }),
      );
      receiver.requests.length = 0;
      node.dispatcher.start();
      for (let index = 0; index < 6; index++) {
        await runWithTenant({ tenantId: slowTenant }, () =>
          node.log.record(randomUUID(), { type: 'hit.created', missionId: randomUUID(), occurredAt: new Date().toISOString(), data: {} }),
        );
      }
      // One at a time to one webhook: the slow endpoint holds one delivery, its other five wait their turn.
      await until(() => receiver.requests.length === 1, 'the slow endpoint to hold its one');
      await runWithTenant({ tenantId: fastTenant }, () =>
        node.log.record(randomUUID(), { type: 'hit.created', missionId: randomUUID(), occurredAt: new Date().toISOString(), data: {} }),
      );
      await until(async () => (await deliveryOf(fastTenant, quick.id))[0]?.state === 'succeeded', 'the other webhook to be served');
      expect(receiver.requests).toHaveLength(1);
      for (const request of receiver.requests) request.release(204);
    } finally {
      await node.dispatcher.stop();
      fast.closeAllConnections();
      fast.close();
    }
  });
});
