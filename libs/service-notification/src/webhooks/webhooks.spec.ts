import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { DomainError } from '@mission/contracts';
import { DEFAULT_DISPATCH_CONCURRENCY, DEFAULT_RETRY_SCHEDULE_SECONDS, sendSigned } from './dispatcher';
import { isPublicAddress, WebhookTargetPolicy } from './target-policy';
import { newWebhookSecret } from './webhooks';
import { EmbeddedNotificationConfigSchema } from '../notification.config';

/** A resolver that answers from a table, as DNS would (a name it does not know does not resolve). */
const dns = (table: Record<string, string[]>) => async (hostname: string) => {
  const addresses = table[hostname];
  if (!addresses) throw new Error(`ENOTFOUND ${hostname}`);
  return addresses.map((address) => ({ address }));
};

/**
 * Real time, whatever jest's fake timers do: the sockets in these tests are real, and the tests
 * that fake `setTimeout` (the code's timeouts) still wait for them on the real clock.
 */
const realSetTimeout = globalThis.setTimeout;
const realSleep = (ms: number): Promise<void> => new Promise((resolve) => realSetTimeout(resolve, ms));

/** Waits until `condition` holds, on the real clock, failing (naming `what`) after a generous deadline. */
async function eventually(condition: () => boolean, what: string, limitMs = 10_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await realSleep(5);
  }
}

/** Fakes `setTimeout` and `clearTimeout` only: the code's timeouts then run on a clock the test moves. */
const fakeTimeoutsOnly = (): void =>
  void jest.useFakeTimers({ doNotFake: ['Date', 'hrtime', 'nextTick', 'performance', 'queueMicrotask', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval'] });

/** Lets promise callbacks and I/O already due run (setImmediate is never faked here). */
const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

async function refusal(check: Promise<unknown>): Promise<string> {
  const error = await check.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!(error instanceof DomainError)) throw new Error(`expected a refusal, got ${String(error)}`);
  expect(error.errors).toEqual([{ field: 'url', message: expect.any(String) }]);
  return error.message;
}

describe('webhook targets', () => {
  const policy = new WebhookTargetPolicy(
    false,
    dns({
      'hooks.example.com': ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'],
      'internal.example.com': ['10.1.2.3'],
      'sneaky.example.com': ['93.184.216.34', '127.0.0.1'],
      'metadata.example.com': ['169.254.169.254'],
      'mapped.example.com': ['::ffff:10.0.0.1'],
    }),
  );

  it('accepts https URLs of public addresses, and names that resolve only to them or not yet at all', async () => {
    await expect(policy.check('https://hooks.example.com/missions?x=1')).resolves.toBeInstanceOf(URL);
    await expect(policy.check('https://93.184.216.34:8443/')).resolves.toBeInstanceOf(URL);
    await expect(policy.check('https://[2606:2800:220:1:248:1893:25c8:1946]/')).resolves.toBeInstanceOf(URL);
    await expect(policy.check('https://not-yet.example.com/')).resolves.toBeInstanceOf(URL);
  });

  it.each([
    ['http://hooks.example.com/', /https/],
    ['ftp://hooks.example.com/', /https/],
    ['hooks.example.com/path', /absolute URL/],
    ['https://user:pass@hooks.example.com/', /credentials/],
    ['https://hooks.example.com/#part', /fragment/],
  ])('refuses %s', async (url, why) => {
    expect(await refusal(policy.check(url))).toMatch(why);
  });

  it.each([
    'https://127.0.0.1/',
    'https://127.1:1/', // 127.0.0.1, abbreviated
    'https://2130706433/', // 127.0.0.1 as one decimal number
    'https://0x7f000001/', // and as hexadecimal
    'https://10.0.0.1/',
    'https://172.16.5.4/',
    'https://192.168.1.1/',
    'https://169.254.169.254/latest/meta-data/', // cloud metadata
    'https://100.64.0.1/', // carrier-grade NAT
    'https://0.0.0.0/',
    'https://[::1]/',
    'https://[::]/',
    'https://[::ffff:127.0.0.1]/', // IPv4-mapped
    'https://[::ffff:7f00:1]/',
    'https://[fd00:ec2::254]/', // unique-local (AWS's IPv6 metadata)
    'https://[fe80::1]/',
    'https://224.0.0.1/',
    'https://[::7f00:1]/', // IPv4-compatible 127.0.0.1
    'https://[fec0::1]/', // site-local
    'https://[64:ff9b::a00:1]/', // NAT64 of 10.0.0.1
    'https://168.63.129.16/', // Azure's platform endpoint
  ])('refuses an address that is not public: %s', async (url) => {
    expect(await refusal(policy.check(url))).toMatch(/loopback, private, link-local or metadata/);
  });

  it.each(['https://internal.example.com/', 'https://sneaky.example.com/', 'https://metadata.example.com/', 'https://mapped.example.com/'])(
    'refuses a name that resolves to an address that is not public: %s',
    async (url) => {
      expect(await refusal(policy.check(url))).toMatch(/must not resolve/);
    },
  );

  it('allows http and private addresses only when WEBHOOKS_ALLOW_PRIVATE is on', async () => {
    const open = new WebhookTargetPolicy(true, dns({}));
    await expect(open.check('http://127.0.0.1:9999/hook')).resolves.toBeInstanceOf(URL);
    await expect(open.check('https://internal.example.com/')).resolves.toBeInstanceOf(URL);
    expect(await refusal(open.check('ftp://127.0.0.1/'))).toMatch(/https/);
  });

  it('leaves the number of connections to one host to the dispatcher, keeping as many idle as it has attempts in flight', () => {
    // An attempt that waited in the agent for a connection would have its timeout running.
    for (const agent of Object.values(new WebhookTargetPolicy(false).agents)) {
      expect(agent.maxSockets).toBe(Infinity);
      expect(agent.maxFreeSockets).toBe(DEFAULT_DISPATCH_CONCURRENCY);
      expect((agent as unknown as { keepAlive: boolean }).keepAlive).toBe(true);
    }
  });

  it('classifies addresses as ipaddr.js does: public unicast only', () => {
    expect(['8.8.8.8', '2001:4860:4860::8888'].map(isPublicAddress)).toEqual([true, true]);
    expect(['127.0.0.1', '::1', '10.0.0.1', '169.254.169.254', '::ffff:8.8.8.8', 'fd00::1', 'nonsense'].map(isPublicAddress)).toEqual([
      false,
      false,
      false,
      false,
      false,
      false,
      false,
    ]);
  });
});

describe('webhook delivery', () => {
  let server: http.Server;
  let port: number;
  const received: Array<{ headers: http.IncomingHttpHeaders; body: string }> = [];
  let answer = 204;

  beforeAll(async () => {
    server = http.createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        received.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
        response.statusCode = answer;
        response.end();
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });

  afterAll(async () => {
    await new Promise((resolve) => server.close(resolve));
  });

  beforeEach(() => {
    received.length = 0;
    answer = 204;
  });

  it('signs as Standard Webhooks specify: an HMAC-SHA256 over id, timestamp and body that an independent check verifies', async () => {
    const secret = newWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    const body = JSON.stringify({ id: 'evt_7_00000000000a', type: 'mission.completed', timestamp: '2026-11-26T10:00:00.000Z', data: { missionId: 'm', status: 'succeeded' } });
    const outcome = await sendSigned(
      { url: new URL(`http://127.0.0.1:${port}/hook`), secret, eventId: 'evt_7_00000000000a', body, attempt: 1 },
      new WebhookTargetPolicy(true),
      5_000,
      new Date('2026-11-26T10:00:05.000Z'),
    );
    expect(outcome).toEqual({ status: 204 });
    const [{ headers, body: delivered }] = received as [(typeof received)[number]];
    expect(delivered).toBe(body);
    expect(headers['content-type']).toBe('application/json');
    expect(headers['webhook-id']).toBe('evt_7_00000000000a');
    expect(headers['webhook-timestamp']).toBe(String(Date.parse('2026-11-26T10:00:05.000Z') / 1000));
    // The receiver's side, written from the specification with Node's crypto, not with the library that signed.
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    const expected = createHmac('sha256', key).update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${delivered}`).digest();
    const signatures = String(headers['webhook-signature'])
      .split(' ')
      .map((part) => part.split(','));
    expect(signatures.some(([version, value]) => version === 'v1' && timingSafeEqual(Buffer.from(value ?? '', 'base64'), expected))).toBe(true);
    // And a body changed on the way does not verify.
    const tampered = createHmac('sha256', key).update(`${headers['webhook-id']}.${headers['webhook-timestamp']}.${delivered} `).digest();
    expect(signatures.some(([, value]) => Buffer.from(value ?? '', 'base64').equals(tampered))).toBe(false);
  });

  it('reports the status of an answer that is not 2xx, and the error of a connection that never answers in time', async () => {
    answer = 503;
    const target = { url: new URL(`http://127.0.0.1:${port}/hook`), secret: newWebhookSecret(), eventId: 'evt_1_000000000001', body: '{}', attempt: 1 };
    await expect(sendSigned(target, new WebhookTargetPolicy(true), 5_000)).resolves.toEqual({ status: 503 });
    const silent = http.createServer(() => undefined);
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const slow = { ...target, url: new URL(`http://127.0.0.1:${(silent.address() as AddressInfo).port}/`) };
      await expect(sendSigned(slow, new WebhookTargetPolicy(true), 300)).resolves.toEqual({ error: 'no answer within 300 ms' });
    } finally {
      silent.closeAllConnections();
      silent.close();
    }
  });

  it('closes the connection of a receiver that answers and then trickles its body, after a second', async () => {
    // The body's grace runs on a fake clock (only setTimeout is faked: the receiver's drip and the
    // sockets are real), so a slow or busy machine cannot make the cut look late, or early.
    let closed = false;
    const trickling = http.createServer((request, response) => {
      request.resume();
      response.writeHead(200, { 'content-type': 'text/plain' });
      const drip = setInterval(() => response.write('.'), 50);
      response.on('close', () => {
        clearInterval(drip);
        closed = true;
      });
    });
    await new Promise<void>((resolve) => trickling.listen(0, '127.0.0.1', resolve));
    fakeTimeoutsOnly();
    try {
      const target = {
        url: new URL(`http://127.0.0.1:${(trickling.address() as AddressInfo).port}/`),
        secret: newWebhookSecret(),
        eventId: 'evt_1_000000000001',
        body: '{}',
        attempt: 1,
      };
      await expect(sendSigned(target, new WebhookTargetPolicy(true), 5_000)).resolves.toEqual({ status: 200 });
      // Just short of the second the body may take, the receiver still trickles (drips flow meanwhile).
      jest.advanceTimersByTime(999);
      await realSleep(120);
      expect(closed).toBe(false);
      // At the second, the connection is closed.
      jest.advanceTimersByTime(1);
      await eventually(() => closed, 'the trickling connection to close');
    } finally {
      jest.useRealTimers();
      trickling.closeAllConnections();
      trickling.close();
    }
  }, 20_000);

  it('does not follow a redirect: a 3xx is an answer that is not 2xx, and the place it names is never called', async () => {
    let elsewhere = 0;
    const other = http.createServer((_request, response) => {
      elsewhere++;
      response.end();
    });
    await new Promise<void>((resolve) => other.listen(0, '127.0.0.1', resolve));
    const redirecting = http.createServer((request, response) => {
      request.resume();
      response.writeHead(307, { location: `http://127.0.0.1:${(other.address() as AddressInfo).port}/internal` }).end();
    });
    await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve));
    try {
      const target = {
        url: new URL(`http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/`),
        secret: newWebhookSecret(),
        eventId: 'evt_1_000000000001',
        body: '{}',
        attempt: 1,
      };
      await expect(sendSigned(target, new WebhookTargetPolicy(true), 5_000)).resolves.toEqual({ status: 307 });
      expect(elsewhere).toBe(0);
    } finally {
      other.close();
      redirecting.close();
    }
  });

  /**
   * A receiver on raw sockets: answers 200 and keeps the connection, resets it (RST) on a request,
   * as one whose keep-alive timeout ran out just as the connection was reused does, or never answers.
   */
  async function resettingReceiver(behave: (connection: number, requestOnIt: number) => 'answer' | 'reset' | 'reset 300 ms later' | 'silent') {
    let connections = 0;
    const requests: Array<{ connection: number; webhookId: string }> = [];
    const sockets = new Set<net.Socket>();
    const server = net.createServer((socket) => {
      const connection = ++connections;
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      let onIt = 0;
      let pending = '';
      socket.on('error', () => undefined);
      socket.on('data', (chunk: Buffer) => {
        pending += chunk.toString('latin1');
        // Requests as they come on the stream: headers, then a body of content-length.
        for (;;) {
          const end = pending.indexOf('\r\n\r\n');
          if (end < 0) return;
          const length = Number(/content-length: (\d+)/i.exec(pending.slice(0, end))?.[1] ?? 0);
          if (pending.length < end + 4 + length) return;
          const head = pending.slice(0, end);
          pending = pending.slice(end + 4 + length);
          onIt++;
          const behaviour = behave(connection, onIt);
          if (behaviour === 'reset') {
            socket.resetAndDestroy();
            return;
          }
          if (behaviour === 'reset 300 ms later') {
            setTimeout(() => socket.resetAndDestroy(), 300);
            return;
          }
          if (behaviour === 'silent') continue;
          requests.push({ connection, webhookId: /webhook-id: (\S+)/i.exec(head)?.[1] ?? '' });
          socket.write('HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n');
        }
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return {
      url: new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`),
      requests,
      connections: () => connections,
      close: () =>
        new Promise((resolve) => {
          server.close(resolve);
          for (const socket of sockets) socket.destroy();
        }),
    };
  }

  it('sends an attempt again at once on another connection when a kept-alive one is reset as it is reused, within the same attempt', async () => {
    // The second request on any connection finds it closed by the receiver.
    const receiver = await resettingReceiver((_connection, onIt) => (onIt === 2 ? 'reset' : 'answer'));
    const policy = new WebhookTargetPolicy(true);
    try {
      const first = { url: receiver.url, secret: newWebhookSecret(), eventId: 'evt_1_000000000001', body: '{}', attempt: 1 };
      await expect(sendSigned(first, policy, 5_000)).resolves.toEqual({ status: 200 });
      // The agent puts the connection back in its pool, for the next request to reuse.
      await eventually(() => Object.keys(policy.agents.http.freeSockets).length > 0, 'the connection to go back to the pool');
      await expect(sendSigned({ ...first, eventId: 'evt_1_000000000002' }, policy, 5_000)).resolves.toEqual({ status: 200 });
      expect(receiver.connections()).toBe(2);
      expect(receiver.requests).toEqual([
        { connection: 1, webhookId: 'evt_1_000000000001' },
        { connection: 2, webhookId: 'evt_1_000000000002' },
      ]);
    } finally {
      await receiver.close();
    }
  });

  it('keeps one timeout across the resend: a new connection that never answers ends the attempt when the first would have', async () => {
    // The first connection answers once, then resets its second request 300 ms after it came; later connections never answer.
    // Both the receiver's 300 ms and the attempt's 400 ms run on a fake clock (only setTimeout is
    // faked; the sockets are real): the test moves it once each request has come, so how slow the
    // machine is does not matter.
    const came: string[] = [];
    const receiver = await resettingReceiver((connection, onIt) => {
      came.push(`${connection}.${onIt}`);
      return connection > 1 ? 'silent' : onIt === 2 ? 'reset 300 ms later' : 'answer';
    });
    const policy = new WebhookTargetPolicy(true);
    try {
      const first = { url: receiver.url, secret: newWebhookSecret(), eventId: 'evt_1_000000000001', body: '{}', attempt: 1 };
      await expect(sendSigned(first, policy, 5_000)).resolves.toEqual({ status: 200 });
      await eventually(() => Object.keys(policy.agents.http.freeSockets).length > 0, 'the connection to go back to the pool');
      fakeTimeoutsOnly();
      let outcome: unknown;
      void sendSigned({ ...first, eventId: 'evt_1_000000000002' }, policy, 400).then((answered) => (outcome = answered));
      await eventually(() => came.includes('1.2'), 'the request on the kept-alive connection');
      // The receiver resets it, 300 ms into the attempt; the request goes again on a new connection.
      jest.advanceTimersByTime(300);
      await eventually(() => came.includes('2.1'), 'the resend on a second connection');
      jest.advanceTimersByTime(99);
      await turn();
      expect(outcome).toBeUndefined();
      // 400 ms from the start, not 300 + 400 (a timeout started again with the resend).
      jest.advanceTimersByTime(1);
      await turn();
      expect(outcome).toEqual({ error: 'no answer within 400 ms' });
      // The resend went out on a second connection.
      expect(receiver.connections()).toBe(2);
      expect(came).toEqual(['1.1', '1.2', '2.1']);
    } finally {
      jest.useRealTimers();
      await receiver.close();
    }
  }, 20_000);

  it('takes a reset on a new connection as the attempt’s answer (no second try)', async () => {
    const receiver = await resettingReceiver(() => 'reset');
    try {
      const target = { url: receiver.url, secret: newWebhookSecret(), eventId: 'evt_1_000000000001', body: '{}', attempt: 1 };
      await expect(sendSigned(target, new WebhookTargetPolicy(true), 5_000)).resolves.toEqual({ error: 'the connection was reset' });
      expect(receiver.connections()).toBe(1);
      expect(receiver.requests).toEqual([]);
    } finally {
      await receiver.close();
    }
  });

  it('refuses at connect time an address the registration would have refused, whatever the name resolved to by then', async () => {
    const target = { url: new URL(`https://127.0.0.1:${port}/hook`), secret: newWebhookSecret(), eventId: 'evt_1_000000000001', body: '{}', attempt: 1 };
    const outcome = await sendSigned(target, new WebhookTargetPolicy(false), 5_000);
    // A fixed phrase: the delivery log never shows which address a name resolved to.
    expect(outcome.error).toBe('the target address is not allowed');
    // A name resolving to loopback (DNS rebinding after registration): refused when dialled.
    const rebound = await sendSigned({ ...target, url: new URL(`https://localhost:${port}/hook`) }, new WebhookTargetPolicy(false), 5_000);
    expect(rebound.error).toBe('the target address is not allowed');
    expect(received).toEqual([]);
  });
});

describe('webhook settings', () => {
  const parse = (env: Record<string, string>) => EmbeddedNotificationConfigSchema.safeParse(env);

  it('reads the retry schedule and the private-target switch, with the contract’s defaults', () => {
    expect(parse({}).data).toMatchObject({ WEBHOOK_RETRY_SCHEDULE: [5, 300, 1800, 7200, 18000, 36000], WEBHOOKS_ALLOW_PRIVATE: false });
    expect(DEFAULT_RETRY_SCHEDULE_SECONDS).toEqual([5, 300, 1800, 7200, 18000, 36000]);
    expect(parse({ WEBHOOK_RETRY_SCHEDULE: '1, 2,3', WEBHOOKS_ALLOW_PRIVATE: 'true' }).data).toMatchObject({ WEBHOOK_RETRY_SCHEDULE: [1, 2, 3], WEBHOOKS_ALLOW_PRIVATE: true });
  });

  it.each([
    ['WEBHOOK_RETRY_SCHEDULE', '5,soon'],
    ['WEBHOOK_RETRY_SCHEDULE', '0'],
    ['WEBHOOK_RETRY_SCHEDULE', '5,,6'],
    ['WEBHOOK_RETRY_SCHEDULE', '999999999'],
    ['WEBHOOKS_ALLOW_PRIVATE', 'perhaps'],
  ])('refuses %s=%s', (name, value) => {
    const result = parse({ [name]: value });
    expect(result.success).toBe(false);
    expect(result.error?.issues[0]?.path[0]).toBe(name);
  });
});
