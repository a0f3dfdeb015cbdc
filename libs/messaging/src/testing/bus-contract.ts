import { randomUUID } from 'node:crypto';
import { DomainError, ErrorCode } from '@mission/contracts';
import { currentTenant, currentTraceparent, optionalTenant, parseTraceparent, runWithTenant, runWithTrace } from '@mission/tenant-context';
import { z } from 'zod';
import { BusMetrics, IncomingMessage, MessageBus, NO_BUS_METRICS, RetryPolicy } from '../bus';
import { eventHandlers } from '../event-handlers';

/** Topics a contract run may use; a Kafka run creates them fresh so runs never see each other. */
export interface ContractTopics {
  /** Served by tenant handlers. */
  readonly requests: string;
  /** Served by operator handlers. */
  readonly operatorRequests: string;
  readonly events: string;
  /** A request topic nobody serves. */
  readonly unserved: string;
}

export interface BusContractFixture {
  readonly topics: ContractTopics;
  /** Retry policy the buses under test are created with. */
  readonly retry: RetryPolicy;
  /** A new, unstarted bus connected to the same broker as every other bus of this fixture (reporting to `metrics` when given). */
  createBus(metrics?: BusMetrics): MessageBus;
  /**
   * `count` distinct keys that land on one partition of `topic` (where the adapter has partitions),
   * so a test can show that order is kept per key, not per partition.
   */
  keysOnOnePartition(topic: string, count: number): string[];
  /** Messages that reached `<topic>.dlq`, as seen by the broker. */
  deadLetters(topic: string): Promise<ReadonlyArray<{ readonly type: string; readonly headers: Readonly<Record<string, string>> }>>;
  teardown(): Promise<void>;
}

/** Named gates a handler waits at until the test opens them. */
class Gates {
  private readonly gates = new Map<string, { promise: Promise<void>; open: () => void }>();

  wait(name: string): Promise<void> {
    return this.gate(name).promise;
  }

  open(name: string): void {
    this.gate(name).open();
  }

  private gate(name: string): { promise: Promise<void>; open: () => void } {
    let gate = this.gates.get(name);
    if (!gate) {
      let open!: () => void;
      const promise = new Promise<void>((resolve) => (open = resolve));
      gate = { promise, open };
      this.gates.set(name, gate);
    }
    return gate;
  }
}

function waitFor<T>(probe: () => T | undefined, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const tick = (): void => {
      const value = probe();
      if (value !== undefined) return resolve(value);
      if (Date.now() > deadline) return reject(new Error(`Timed out waiting for ${what}`));
      setTimeout(tick, 20);
    };
    tick();
  });
}

/**
 * The behaviour every MessageBus adapter must have. Call inside a Jest file with a fixture
 * factory; the suite starts a server bus and a client bus, as two processes would.
 */
export function describeBusContract(name: string, setup: () => Promise<BusContractFixture>, timeoutMs = 15_000): void {
  describe(`MessageBus contract: ${name}`, () => {
    let fixture: BusContractFixture;
    let server: MessageBus;
    let client: MessageBus;
    const tenantA = randomUUID();
    const tenantB = randomUUID();
    const received: IncomingMessage[] = [];
    const secondGroup: IncomingMessage[] = [];
    const flakyAttempts = new Map<string, number>();
    const seenTenants: Array<string | undefined> = [];
    /** Messages a handler saw although they carried no valid tenant: must stay empty. */
    const handledWithoutTenant: string[] = [];
    const asTenantA = <T>(fn: () => Promise<T>): Promise<T> => runWithTenant({ tenantId: tenantA }, fn);
    /** Request markers a `record` handler saw. */
    const handledRequests: string[] = [];
    /** Payloads the typed `shaped` handler got: only those that matched its schema. */
    const shaped: unknown[] = [];
    const typedEvents = eventHandlers({ shaped: z.object({ n: z.int() }) }, { shaped: async (event) => void shaped.push(event) });
    /** Ids of the events a subscriber of `shaped` events alone was handed (the bus passes other types by). */
    const shapedOnly: string[] = [];
    const gates = new Gates();

    async function deadLetterOf(topic: string, id: string): Promise<{ readonly type: string; readonly headers: Readonly<Record<string, string>> }> {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const dead = (await fixture.deadLetters(topic)).find((m) => m.headers['message-id'] === id);
        if (dead) return dead;
        if (Date.now() > deadline) throw new Error(`Timed out waiting for ${id} in ${topic}.dlq`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    }

    beforeAll(async () => {
      fixture = await setup();
      const { topics } = fixture;
      server = fixture.createBus();
      client = fixture.createBus();
      server.serve(topics.requests, 'contract-server', {
        echo: async (message) => ({ echoed: message.payload, tenant: optionalTenant()?.tenantId ?? null, type: message.type, trace: currentTraceparent() ?? null }),
        mutate: async (message) => {
          (message.payload as { touched?: boolean }).touched = true;
          return message.payload;
        },
        refuse: async () => {
          throw new DomainError(ErrorCode.Conflict, 'no longer pending', [{ field: 'id', message: 'decided' }]);
        },
        crash: async () => {
          throw new Error('secret internal detail at /srv/db');
        },
        databaseDown: async () => {
          throw Object.assign(new Error('terminating connection due to administrator command at db-7.internal'), { code: '57P01' });
        },
        requireTenant: async () => currentTenant().tenantId,
        gated: async (message) => {
          await gates.wait((message.payload as { gate: string }).gate);
          return 'opened';
        },
        // Answers for another tenant first, on the requester's own reply topic, as a forger on
        // the bus could; then the real answer, which must find nobody waiting any more.
        forgedReply: async (message) => {
          await runWithTenant({ tenantId: tenantB }, () =>
            server.publish(message.headers['reply-to'] ?? '', {
              type: 'reply',
              key: message.key,
              payload: { ok: true, data: 'forged for another tenant' },
              headers: { 'correlation-id': message.headers['correlation-id'] ?? '', 'reply-status': 'ok' },
            }),
          );
          await new Promise((resolve) => setTimeout(resolve, 200));
          return 'real';
        },
        record: async (message) => {
          handledRequests.push((message.payload as { marker: string }).marker);
          return { marker: (message.payload as { marker: string }).marker };
        },
        slow: async (message) => {
          await new Promise((resolve) => setTimeout(resolve, (message.payload as { ms: number }).ms));
          return 'late';
        },
      });
      server.serve(
        topics.operatorRequests,
        'contract-operator',
        { whoami: async (message) => ({ tenant: optionalTenant()?.tenantId ?? null, header: message.headers['tenant-id'] ?? null }) },
        { tenancy: 'operator' },
      );
      server.subscribe(topics.events, 'contract-group-1', async (message) => {
        seenTenants.push(optionalTenant()?.tenantId);
        if (!optionalTenant()) handledWithoutTenant.push(message.id);
        if (message.type === 'flaky') {
          const attempts = (flakyAttempts.get(message.id) ?? 0) + 1;
          flakyAttempts.set(message.id, attempts);
          if (attempts < 2) throw new Error('transient');
        }
        if (message.type === 'poison') throw new Error('always fails');
        if (message.type === 'held') await gates.wait((message.payload as { gate: string }).gate);
        await typedEvents(message);
        received.push(message);
      });
      client.subscribe(
        topics.events,
        'contract-group-3',
        eventHandlers({ shaped: z.object({ n: z.int() }) }, { shaped: async (_event, message) => void shapedOnly.push(message.id) }),
      );
      client.subscribe(topics.events, 'contract-group-2', async (message) => {
        if (!optionalTenant()) handledWithoutTenant.push(message.id);
        secondGroup.push(message);
      });
      await Promise.all([server.start(), client.start()]);
    }, timeoutMs * 4);

    afterAll(async () => {
      await Promise.all([client?.close(), server?.close()]);
      await fixture?.teardown();
    }, timeoutMs);

    it('reports healthy once started', () => {
      expect(server.health().up).toBe(true);
      expect(client.health().up).toBe(true);
    });

    it(
      'answers a request with the handler result',
      async () => {
        const reply = await asTenantA(() => client.request<{ echoed: unknown; tenant: string | null }>(fixture.topics.requests, 'echo', { n: 1, s: 'ü' }));
        expect(reply).toMatchObject({ echoed: { n: 1, s: 'ü' }, tenant: tenantA, type: 'echo' });
      },
      timeoutMs,
    );

    it(
      'continues the caller’s W3C trace in the handler, and starts one for a caller without',
      async () => {
        const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
        const traced = await runWithTrace(`00-${traceId}-00f067aa0ba902b7-01`, () => asTenantA(() => client.request<{ trace: string }>(fixture.topics.requests, 'echo', {})));
        expect(parseTraceparent(traced.trace)?.traceId).toBe(traceId);
        const untraced = await asTenantA(() => client.request<{ trace: string }>(fixture.topics.requests, 'echo', {}));
        expect(parseTraceparent(untraced.trace)?.traceId).not.toBe(traceId);
      },
      timeoutMs,
    );

    it(
      'refuses a tenant request without a tenant: an error reply, a dead letter with the reason, no handler call',
      async () => {
        const before = (await fixture.deadLetters(fixture.topics.requests)).length;
        await expect(client.request(fixture.topics.requests, 'requireTenant', { marker: 'no-tenant' })).rejects.toMatchObject({ code: ErrorCode.Internal });
        const deadline = Date.now() + timeoutMs;
        let refused: Awaited<ReturnType<BusContractFixture['deadLetters']>> = [];
        while (refused.length <= before && Date.now() < deadline) {
          refused = await fixture.deadLetters(fixture.topics.requests);
          if (refused.length <= before) await new Promise((resolve) => setTimeout(resolve, 100));
        }
        const dead = refused.find((m) => m.type === 'requireTenant');
        expect(dead?.headers['error']).toMatch(/^TenantRefused: .*without a tenant-id header/);
        expect(dead?.headers['attempts']).toBe('0');
        expect(dead?.headers['tenant-id']).toBeUndefined();
      },
      timeoutMs * 2,
    );

    it(
      'serves operator requests outside any tenant context, whoever sends them',
      async () => {
        await expect(client.request(fixture.topics.operatorRequests, 'whoami', {})).resolves.toEqual({ tenant: null, header: null });
        await expect(asTenantA(() => client.request(fixture.topics.operatorRequests, 'whoami', {}))).resolves.toEqual({ tenant: null, header: tenantA });
      },
      timeoutMs,
    );

    it(
      'carries the tenant context to the handler and back',
      async () => {
        const [a, b] = await Promise.all([
          runWithTenant({ tenantId: tenantA }, () => client.request<{ tenant: string }>(fixture.topics.requests, 'echo', {})),
          runWithTenant({ tenantId: tenantB }, () => client.request<{ tenant: string }>(fixture.topics.requests, 'echo', {})),
        ]);
        expect(a.tenant).toBe(tenantA);
        expect(b.tenant).toBe(tenantB);
      },
      timeoutMs,
    );

    it(
      'runs a tenant handler in the tenant of its message',
      async () => {
        await expect(asTenantA(() => client.request(fixture.topics.requests, 'requireTenant', {}))).resolves.toBe(tenantA);
      },
      timeoutMs,
    );

    it(
      'never shares objects between sender and handler',
      async () => {
        const payload = { touched: false };
        const reply = await asTenantA(() => client.request<{ touched: boolean }>(fixture.topics.requests, 'mutate', payload));
        expect(reply.touched).toBe(true);
        expect(payload.touched).toBe(false);
      },
      timeoutMs,
    );

    it(
      'rethrows a domain error with its code and field errors',
      async () => {
        const failure = asTenantA(() => client.request(fixture.topics.requests, 'refuse', {}));
        await expect(failure).rejects.toBeInstanceOf(DomainError);
        await expect(failure).rejects.toMatchObject({ code: ErrorCode.Conflict, message: 'no longer pending', errors: [{ field: 'id', message: 'decided' }] });
      },
      timeoutMs,
    );

    it(
      'hides unexpected failures behind internal_error',
      async () => {
        const failure = asTenantA(() => client.request(fixture.topics.requests, 'crash', {}));
        await expect(failure).rejects.toMatchObject({ code: ErrorCode.Internal, message: 'internal error' });
      },
      timeoutMs,
    );

    it(
      'answers dependency_unavailable, naming nothing, when a handler cannot reach what it depends on',
      async () => {
        const failure = asTenantA(() => client.request(fixture.topics.requests, 'databaseDown', {}));
        await expect(failure).rejects.toMatchObject({ code: ErrorCode.DependencyUnavailable });
        await expect(failure).rejects.not.toMatchObject({ message: expect.stringContaining('db-7') });
      },
      timeoutMs,
    );

    it(
      "times each request from its requester's side: answered, with a success or an error, or not (nobody answered in time)",
      async () => {
        const requests: Array<{ topic: string; seconds: number; answered: boolean }> = [];
        const timed = fixture.createBus({ ...NO_BUS_METRICS, requested: (topic, seconds, answered) => void requests.push({ topic, seconds, answered }) });
        await timed.start();
        try {
          await asTenantA(() => timed.request(fixture.topics.requests, 'echo', { n: 1 }));
          await expect(asTenantA(() => timed.request(fixture.topics.requests, 'refuse', {}))).rejects.toMatchObject({ code: ErrorCode.Conflict });
          await expect(asTenantA(() => timed.request(fixture.topics.unserved, 'echo', {}, { timeoutMs: 300 }))).rejects.toMatchObject({ code: ErrorCode.DependencyUnavailable });
        } finally {
          await timed.close();
        }
        expect(requests.map(({ topic, answered }) => ({ topic, answered }))).toEqual([
          { topic: fixture.topics.requests, answered: true },
          { topic: fixture.topics.requests, answered: true },
          { topic: fixture.topics.unserved, answered: false },
        ]);
        expect(requests[2]?.seconds).toBeGreaterThanOrEqual(0.29);
        for (const { seconds } of requests) expect(seconds).toBeLessThan(10);
      },
      timeoutMs,
    );

    it(
      'answers an unknown message type with an error instead of hanging',
      async () => {
        await expect(asTenantA(() => client.request(fixture.topics.requests, 'no-such-type', {}))).rejects.toMatchObject({ code: ErrorCode.Internal });
      },
      timeoutMs,
    );

    it(
      'fails with dependency_unavailable when nobody answers in time',
      async () => {
        const started = Date.now();
        await expect(client.request(fixture.topics.unserved, 'echo', {}, { timeoutMs: 300 })).rejects.toMatchObject({
          code: ErrorCode.DependencyUnavailable,
        });
        expect(Date.now() - started).toBeGreaterThanOrEqual(290);
        await expect(asTenantA(() => client.request(fixture.topics.requests, 'slow', { ms: 1_000 }, { timeoutMs: 200 }))).rejects.toMatchObject({
          code: ErrorCode.DependencyUnavailable,
        });
      },
      timeoutMs,
    );

    it(
      'matches many concurrent replies to their requests',
      async () => {
        const replies = await Promise.all(
          Array.from({ length: 50 }, (_, n) => asTenantA(() => client.request<{ echoed: { n: number } }>(fixture.topics.requests, 'echo', { n }, { key: `k${n % 7}` }))),
        );
        expect(replies.map((reply) => reply.echoed.n)).toEqual(Array.from({ length: 50 }, (_, n) => n));
      },
      timeoutMs,
    );

    it(
      'handles requests concurrently: one that waits holds up none behind it, even on its key',
      async () => {
        const gate = randomUUID();
        const held = asTenantA(() => client.request<string>(fixture.topics.requests, 'gated', { gate }, { key: 'one-key', timeoutMs: timeoutMs }));
        const settled = held.then(() => 'answered');
        try {
          for (let n = 0; n < 5; n++) {
            await expect(
              asTenantA(() => client.request<{ echoed: { n: number } }>(fixture.topics.requests, 'echo', { n }, { key: 'one-key', timeoutMs: timeoutMs / 3 })),
            ).resolves.toMatchObject({ echoed: { n } });
          }
          expect(await Promise.race([settled, new Promise((resolve) => setTimeout(() => resolve('still waiting'), 20))])).toBe('still waiting');
        } finally {
          gates.open(gate);
        }
        await expect(held).resolves.toBe('opened');
      },
      timeoutMs,
    );

    it(
      'keeps events of one key in order while other keys on the same partition go ahead',
      async () => {
        const gate = randomUUID();
        const [heldKey, freeKey] = fixture.keysOnOnePartition(fixture.topics.events, 2);
        const ids = { held: randomUUID(), behindHeld: randomUUID(), free: randomUUID() };
        await asTenantA(async () => {
          await client.publish(fixture.topics.events, { id: ids.held, type: 'held', key: heldKey, payload: { gate } });
          await client.publish(fixture.topics.events, { id: ids.behindHeld, type: 'after-held', key: heldKey, payload: {} });
          await client.publish(fixture.topics.events, { id: ids.free, type: 'free', key: freeKey, payload: {} });
        });
        try {
          await waitFor(() => received.find((m) => m.id === ids.free), timeoutMs / 2, 'the event of the other key');
          expect(received.some((m) => m.id === ids.held || m.id === ids.behindHeld)).toBe(false);
        } finally {
          gates.open(gate);
        }
        await waitFor(() => received.find((m) => m.id === ids.behindHeld), timeoutMs, 'the events of the held key');
        const order = received.filter((m) => m.key === heldKey).map((m) => m.id);
        expect(order).toEqual([ids.held, ids.behindHeld]);
      },
      timeoutMs,
    );

    it(
      'refuses a reply that names another tenant than its request: internal_error, never its body',
      async () => {
        const outcome = await asTenantA(() => client.request(fixture.topics.requests, 'forgedReply', {})).then(
          (reply) => reply,
          (error: unknown) => error,
        );
        expect(outcome).toBeInstanceOf(DomainError);
        expect((outcome as DomainError).code).toBe(ErrorCode.Internal);
        expect(JSON.stringify(outcome)).not.toContain('forged');
      },
      timeoutMs,
    );

    it(
      'skips a request whose requester stopped waiting, and replies to a durable reply-to topic as an event keyed like the request',
      async () => {
        const correlation = { expired: randomUUID(), live: randomUUID() };
        const markers = { expired: randomUUID(), live: randomUUID() };
        const send = (which: 'expired' | 'live', deadline: number) =>
          asTenantA(() =>
            client.publish(fixture.topics.requests, {
              type: 'record',
              key: `${tenantA}:durable`,
              payload: { marker: markers[which] },
              headers: { 'reply-to': fixture.topics.events, 'correlation-id': correlation[which], 'request-deadline': String(deadline) },
            }),
          );
        await send('expired', Date.now() - 1_000);
        await send('live', Date.now() + 60_000);
        const reply = await waitFor(
          () => received.find((m) => m.type === 'reply' && m.headers['correlation-id'] === correlation.live),
          timeoutMs,
          'the reply on the durable topic',
        );
        expect(reply.payload).toEqual({ ok: true, data: { marker: markers.live } });
        expect(reply.key).toBe(`${tenantA}:durable`);
        expect(reply.headers['tenant-id']).toBe(tenantA);
        expect(handledRequests).toContain(markers.live);
        expect(handledRequests).not.toContain(markers.expired);
        expect(received.some((m) => m.headers['correlation-id'] === correlation.expired)).toBe(false);
      },
      timeoutMs,
    );

    it(
      'delivers each event to every group, in order per key, with its tenant',
      async () => {
        const key = `${tenantA}:${randomUUID()}`;
        await runWithTenant({ tenantId: tenantA }, async () => {
          for (let seq = 0; seq < 20; seq++) await client.publish(fixture.topics.events, { type: 'ordered', key, payload: { seq } });
        });
        const inGroup1 = await waitFor(
          () => {
            const mine = received.filter((m) => m.key === key);
            return mine.length >= 20 ? mine : undefined;
          },
          timeoutMs,
          'group 1 to receive 20 events',
        );
        const inGroup2 = await waitFor(
          () => {
            const mine = secondGroup.filter((m) => m.key === key);
            return mine.length >= 20 ? mine : undefined;
          },
          timeoutMs,
          'group 2 to receive 20 events',
        );
        for (const seen of [inGroup1, inGroup2]) {
          expect(seen.map((m) => (m.payload as { seq: number }).seq)).toEqual(Array.from({ length: 20 }, (_, seq) => seq));
        }
        expect(inGroup1.every((m) => m.headers['tenant-id'] === tenantA && m.type === 'ordered')).toBe(true);
        expect(seenTenants).toContain(tenantA);
      },
      timeoutMs,
    );

    it(
      'keeps the message id given by the publisher, for idempotent consumers',
      async () => {
        const id = randomUUID();
        await asTenantA(() => client.publish(fixture.topics.events, { id, type: 'with-id', key: 'ids', payload: {} }));
        const message = await waitFor(() => received.find((m) => m.id === id), timeoutMs, 'the event with a fixed id');
        expect(message.type).toBe('with-id');
      },
      timeoutMs,
    );

    it(
      'retries a failing handler until it succeeds',
      async () => {
        const id = randomUUID();
        await asTenantA(() => client.publish(fixture.topics.events, { id, type: 'flaky', key: 'flaky', payload: {} }));
        const message = await waitFor(() => received.find((m) => m.id === id), timeoutMs, 'the flaky event to succeed');
        expect(message.attempt).toBe(2);
        expect(flakyAttempts.get(id)).toBe(2);
      },
      timeoutMs,
    );

    it(
      'dead-letters a message that keeps failing, with its headers and the error',
      async () => {
        const id = randomUUID();
        await runWithTenant({ tenantId: tenantB }, () => client.publish(fixture.topics.events, { id, type: 'poison', key: 'poison', payload: {} }));
        const dead = await deadLetterOf(fixture.topics.events, id);
        expect(dead?.type).toBe('poison');
        expect(dead?.headers['tenant-id']).toBe(tenantB);
        expect(dead?.headers['error']).toContain('always fails');
        expect(dead?.headers['attempts']).toBe(String(fixture.retry.attempts));
        // The poison message does not block the messages behind it, even those on its own key.
        const after = randomUUID();
        await asTenantA(() => client.publish(fixture.topics.events, { id: after, type: 'after-poison', key: 'poison', payload: {} }));
        await expect(waitFor(() => received.find((m) => m.id === after), timeoutMs, 'the event after the poison one')).resolves.toBeDefined();
      },
      timeoutMs * 2,
    );

    it(
      'dead-letters at once, without retrying, an event whose payload fails its schema, naming its type and fields',
      async () => {
        const id = randomUUID();
        await asTenantA(() => client.publish(fixture.topics.events, { id, type: 'shaped', key: 'shaped', payload: { n: 'one' } }));
        const dead = await deadLetterOf(fixture.topics.events, id);
        expect(dead.headers['error']).toMatch(/^PoisonMessage: The shaped payload does not match its schema \(n: /);
        expect(dead.headers['attempts']).toBe('1');
        // One behind it on its key still arrives; a field its schema does not know (a newer producer's) is no reason to refuse it.
        const after = randomUUID();
        await asTenantA(() => client.publish(fixture.topics.events, { id: after, type: 'shaped', key: 'shaped', payload: { n: 1, addedLater: true } }));
        await waitFor(() => received.find((m) => m.id === after), timeoutMs, 'the valid event after the malformed one');
        expect(shaped).toEqual([{ n: 1 }]);
      },
      timeoutMs * 2,
    );

    it(
      "never hands a typed handler an event of a type it does not name, nor dead-letters it, and goes on with the next one on its key (that it is not even opened: the adapters' own tests)",
      async () => {
        const [ignored, next] = [randomUUID(), randomUUID()];
        await asTenantA(() => client.publish(fixture.topics.events, { id: ignored, type: 'unlisted', key: 'typed-only', payload: { n: 'not a number' } }));
        await asTenantA(() => client.publish(fixture.topics.events, { id: next, type: 'shaped', key: 'typed-only', payload: { n: 2 } }));
        await waitFor(() => (shapedOnly.includes(next) ? true : undefined), timeoutMs, 'the shaped event behind the unlisted one');
        // The untyped subscriber of another group got both: the event was published and delivered.
        await waitFor(() => (received.some((m) => m.id === ignored) ? true : undefined), timeoutMs, 'the unlisted event in the untyped group');
        expect(shapedOnly).not.toContain(ignored);
        expect((await fixture.deadLetters(fixture.topics.events)).map((m) => m.headers['message-id'])).not.toContain(ignored);
      },
      timeoutMs * 2,
    );

    it.each([
      ['without a tenant-id header', {}, /without a tenant-id header/],
      ['with a malformed tenant-id header', { 'tenant-id': "x' OR 1=1" }, /invalid tenant-id header/],
    ])(
      'dead-letters an event %s at once, with the reason, and never hands it to a handler',
      async (_label, headers, reason) => {
        const id = randomUUID();
        await client.publish(fixture.topics.events, { id, type: 'untenanted', key: 'untenanted', payload: {}, headers });
        const dead = await deadLetterOf(fixture.topics.events, id);
        expect(dead.headers['error']).toMatch(reason);
        expect(dead.headers['attempts']).toBe('0');
        // A tenant event behind it on the same key still arrives: the refusal blocks nothing.
        const after = randomUUID();
        await asTenantA(() => client.publish(fixture.topics.events, { id: after, type: 'after-untenanted', key: 'untenanted', payload: {} }));
        await waitFor(() => received.find((m) => m.id === after), timeoutMs, 'the tenant event after the refused one');
        expect(received.some((m) => m.id === id)).toBe(false);
        expect(handledWithoutTenant).toEqual([]);
      },
      timeoutMs * 2,
    );

    it(
      'broadcasts to every instance of a group that asks for it, from its start, and replays nothing from before',
      async () => {
        const marker = randomUUID();
        await asTenantA(() => client.publish(fixture.topics.events, { type: 'broadcast', key: 'broadcast', payload: { marker, phase: 'before' } }));
        const seen: Array<Array<{ marker: string; phase: string; n?: number }>> = [[], []];
        const instances = seen.map((into) => {
          const bus = fixture.createBus();
          bus.subscribe(
            fixture.topics.events,
            'contract-broadcast',
            async (message) => {
              const payload = message.payload as { marker: string; phase: string; n?: number };
              if (message.type === 'broadcast' && payload.marker === marker) into.push(payload);
            },
            { broadcast: true },
          );
          return bus;
        });
        try {
          await Promise.all(instances.map((bus) => bus.start()));
          // A group that has just joined may settle its starting offsets a moment after start:
          // events are sent until both instances have one, then one more that both must get.
          const deadline = Date.now() + timeoutMs;
          for (let n = 0; seen.some((into) => into.length === 0); n++) {
            if (Date.now() > deadline) throw new Error('an instance never got a broadcast event');
            await asTenantA(() => client.publish(fixture.topics.events, { type: 'broadcast', key: 'broadcast', payload: { marker, phase: 'after', n } }));
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
          await asTenantA(() => client.publish(fixture.topics.events, { type: 'broadcast', key: 'broadcast', payload: { marker, phase: 'last' } }));
          while (seen.some((into) => !into.some((payload) => payload.phase === 'last'))) {
            if (Date.now() > deadline) throw new Error('an instance missed the last broadcast event');
            await new Promise((resolve) => setTimeout(resolve, 50));
          }
          for (const into of seen) expect(into.filter((payload) => payload.phase === 'before')).toEqual([]);
        } finally {
          await Promise.all(instances.map((bus) => bus.close()));
        }
      },
      timeoutMs * 2,
    );

    it(
      'rejects a request still waiting for its reply when the bus closes',
      async () => {
        const leaving = fixture.createBus();
        await leaving.start();
        const waiting = asTenantA(() => leaving.request(fixture.topics.requests, 'slow', { ms: 1_500 }, { timeoutMs: 10_000 }));
        const outcome = waiting.then(
          () => 'answered',
          (error: unknown) => error,
        );
        await new Promise((resolve) => setTimeout(resolve, 50));
        await leaving.close();
        const error = await outcome;
        expect(error).toBeInstanceOf(DomainError);
        expect((error as DomainError).code).toBe(ErrorCode.DependencyUnavailable);
      },
      timeoutMs,
    );

    it(
      'refuses to send once closed',
      async () => {
        const late = fixture.createBus();
        await late.start();
        await late.close();
        expect(late.health().up).toBe(false);
        await expect(late.request(fixture.topics.requests, 'echo', {})).rejects.toMatchObject({ code: ErrorCode.DependencyUnavailable });
      },
      timeoutMs,
    );
  });
}
