import { KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError } from 'kafkajs';
import { KafkaBus } from './kafka-bus';
import {
  busLogEntry,
  deadLetterHeaders,
  headersFromKafka,
  incomingFromKafka,
  isStuckProducerError,
  isUnknownTopicError,
  mergeTopicSpecs,
  partitionConcurrency,
  replyTopicName,
  REQUEST_DEADLINE_HEADER,
  requestExpired,
  topicNamePart,
  whileBeating,
  withTimeout,
} from './kafka-mapping';
import { BatchingSender, ProducerHandle, RenewingProducer, unknownTopicError } from './producers';

const record = (headers: Record<string, Buffer | string | Array<Buffer | string> | undefined>, value: string | null = '{"a":1}') => ({
  key: Buffer.from('tenant:aggregate'),
  value: value === null ? null : Buffer.from(value),
  timestamp: '0',
  attributes: 0,
  offset: '42',
  headers,
});

describe('headersFromKafka', () => {
  it('turns Buffers into strings and keeps strings', () => {
    expect(headersFromKafka({ 'message-id': Buffer.from('id-1'), 'tenant-id': 't', 'x-ü': Buffer.from('ü', 'utf8') })).toEqual({
      'message-id': 'id-1',
      'tenant-id': 't',
      'x-ü': 'ü',
    });
  });

  it('keeps the last value of a repeated header and skips undefined ones', () => {
    expect(headersFromKafka({ error: [Buffer.from('first'), 'last'], gone: undefined })).toEqual({ error: 'last' });
  });

  it('accepts records without headers', () => {
    expect(headersFromKafka(undefined)).toEqual({});
  });
});

describe('incomingFromKafka', () => {
  it('maps key, headers, type, id and a JSON payload', () => {
    const incoming = incomingFromKafka('t.events', 2, record({ 'message-id': Buffer.from('m-1'), 'message-type': Buffer.from('ordered') }));
    expect(incoming).toEqual({
      id: 'm-1',
      topic: 't.events',
      type: 'ordered',
      key: 'tenant:aggregate',
      payload: { a: 1 },
      headers: { 'message-id': 'm-1', 'message-type': 'ordered' },
    });
  });

  it('names a record without ids by its position, and reads a null value as null', () => {
    const incoming = incomingFromKafka('t.events', 2, { ...record({}, null), key: null });
    expect(incoming).toMatchObject({ id: 't.events/2/42', type: '', key: '', payload: null });
  });

  it('throws on a value that is not JSON', () => {
    expect(() => incomingFromKafka('t', 0, record({}, 'not json'))).toThrow(SyntaxError);
  });
});

describe('deadLetterHeaders', () => {
  it('adds the error and the attempts to the original headers', () => {
    expect(deadLetterHeaders({ 'message-id': 'm', 'tenant-id': 't' }, new Error('always fails'), 5)).toEqual({
      'message-id': 'm',
      'tenant-id': 't',
      error: 'Error: always fails',
      attempts: '5',
    });
  });
});

describe('requestExpired', () => {
  it('is true only for a deadline in the past', () => {
    expect(requestExpired({ [REQUEST_DEADLINE_HEADER]: '1000' }, 1001)).toBe(true);
    expect(requestExpired({ [REQUEST_DEADLINE_HEADER]: '1000' }, 1000)).toBe(false);
    expect(requestExpired({}, 1001)).toBe(false);
    expect(requestExpired({ [REQUEST_DEADLINE_HEADER]: 'soon' }, 1001)).toBe(false);
  });
});

describe('topic names', () => {
  it('builds the reply topic from legal characters only', () => {
    expect(replyTopicName('mission-service', 'pod-7')).toBe('replies.mission-service.pod-7');
    expect(replyTopicName('my app/1', 'ä:b')).toBe('replies.my-app-1.--b');
    expect(topicNamePart('')).toBe('-');
    expect(replyTopicName('x'.repeat(300), 'y').length).toBe(249);
  });

  it('merges topics listed twice, keeping the larger partition count', () => {
    expect(
      mergeTopicSpecs([
        { name: 'a', partitions: 3 },
        { name: 'b', partitions: 1 },
        { name: 'a', partitions: 6 },
      ]),
    ).toEqual([
      { name: 'a', partitions: 6 },
      { name: 'b', partitions: 1 },
    ]);
    expect(() => mergeTopicSpecs([{ name: 'a', partitions: 0 }])).toThrow(/positive partition count/);
  });

  it('keeps the largest message size of a topic listed twice, and none for topics without one', () => {
    expect(
      mergeTopicSpecs([
        { name: 'a', partitions: 3, maxMessageBytes: 4_000_000 },
        { name: 'b', partitions: 1 },
        { name: 'a', partitions: 1, maxMessageBytes: 16_000_000 },
      ]),
    ).toEqual([
      { name: 'a', partitions: 3, maxMessageBytes: 16_000_000 },
      { name: 'b', partitions: 1 },
    ]);
  });

  it('consumes between 2 and 16 partitions at once', () => {
    expect(partitionConcurrency(undefined)).toBe(2);
    expect(partitionConcurrency(1)).toBe(2);
    expect(partitionConcurrency(6)).toBe(6);
    expect(partitionConcurrency(64)).toBe(16);
  });
});

describe('busLogEntry', () => {
  const log = (extra: Record<string, unknown>) => ({ timestamp: 'now', logger: 'kafkajs', message: 'Crash: boom', ...extra });

  it('maps ERROR and WARN to structured entries and drops the rest', () => {
    expect(busLogEntry({ namespace: 'Consumer', level: 1, log: log({ groupId: 'g', error: new Error('boom') }) })).toEqual({
      level: 'error',
      message: 'Crash: boom',
      context: { source: 'kafkajs', namespace: 'Consumer', groupId: 'g', error: 'Error: boom' },
    });
    expect(busLogEntry({ namespace: 'Producer', level: 2, log: log({}) })?.level).toBe('warn');
    expect(busLogEntry({ namespace: 'Consumer', level: 4, log: log({}) })).toBeUndefined();
    expect(busLogEntry({ namespace: 'Consumer', level: 5, log: log({}) })).toBeUndefined();
  });

  it('downgrades protocol error responses, which their callers handle, to warnings', () => {
    const entry = busLogEntry({
      namespace: 'Connection',
      level: 1,
      log: { timestamp: 'now', message: 'Response Heartbeat(key: 12, version: 3)', error: 'The group is rebalancing' },
    });
    expect(entry).toMatchObject({ level: 'warn', context: { namespace: 'Connection', error: 'The group is rebalancing' } });
  });
});

describe('isUnknownTopicError', () => {
  it('finds UNKNOWN_TOPIC_OR_PARTITION in the cause chain of a kafkajs error', () => {
    const protocol = new KafkaJSProtocolError('This server does not host this topic-partition');
    Object.assign(protocol, { type: 'UNKNOWN_TOPIC_OR_PARTITION' });
    // What the producer throws once its retries run out: the protocol error is the cause.
    const exhausted: unknown = Reflect.construct(KafkaJSNumberOfRetriesExceeded, [protocol, { retryCount: 5, retryTime: 300 }]);
    expect(isUnknownTopicError(exhausted)).toBe(true);
    expect(isUnknownTopicError(new Error('connection refused'))).toBe(false);
    expect(isUnknownTopicError(undefined)).toBe(false);
  });
});

describe('isStuckProducerError', () => {
  it('recognises the broker answers that wedge an idempotent producer, in the cause chain too', () => {
    for (const type of ['OUT_OF_ORDER_SEQUENCE_NUMBER', 'UNKNOWN_PRODUCER_ID', 'INVALID_PRODUCER_EPOCH']) {
      const protocol = Object.assign(new KafkaJSProtocolError('refused'), { type });
      expect(isStuckProducerError(protocol)).toBe(true);
      expect(isStuckProducerError(Reflect.construct(KafkaJSNumberOfRetriesExceeded, [protocol, { retryCount: 1, retryTime: 1 }]))).toBe(true);
    }
    expect(isStuckProducerError(Object.assign(new KafkaJSProtocolError('x'), { type: 'NOT_LEADER_FOR_PARTITION' }))).toBe(false);
    expect(isStuckProducerError(unknownTopicError('t'))).toBe(false);
    expect(isStuckProducerError(new Error('connection refused'))).toBe(false);
  });
});

describe('withTimeout', () => {
  it('settles like the promise when it is quicker', async () => {
    await expect(withTimeout(Promise.resolve(7), 1_000, () => new Error('late'))).resolves.toBe(7);
    await expect(withTimeout(Promise.reject(new Error('no')), 1_000, () => new Error('late'))).rejects.toThrow('no');
  });

  it('rejects with the timeout error otherwise', async () => {
    await expect(withTimeout(new Promise(() => undefined), 10, () => new Error('late'))).rejects.toThrow('late');
  });
});

describe('whileBeating', () => {
  it('beats while the work runs, ignores failing beats and stops afterwards', async () => {
    // The work finishes only once it has seen three beats (each failing), so
    // the test does not depend on how promptly a loaded machine fires timers.
    let beats = 0;
    let thirdBeat!: () => void;
    const sawThree = new Promise<void>((resolve) => (thirdBeat = resolve));
    const result = await whileBeating(
      async () => {
        beats++;
        if (beats === 3) thirdBeat();
        throw new Error('rebalancing');
      },
      5,
      async () => {
        await sawThree;
        return 'done';
      },
    );
    expect(result).toBe('done');
    expect(beats).toBe(3);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(beats).toBe(3);
  });
});

describe('KafkaBus registration (no broker needed)', () => {
  const bus = () => new KafkaBus({ brokers: ['127.0.0.1:1'], clientId: 'unit', logger: { warn: () => undefined, error: () => undefined } });
  const noop = async () => undefined;

  it('refuses a group that would both serve and subscribe, or read one topic twice', () => {
    const b = bus();
    b.serve('a.requests', 'g', {});
    b.serve('b.requests', 'g', {});
    expect(() => b.serve('a.requests', 'g', {})).toThrow(/already serves/);
    expect(() => b.subscribe('a.events', 'g', noop)).toThrow(/separate groups/);
    b.subscribe('a.events', 'h', noop);
    b.subscribe('b.events', 'h', noop);
    expect(() => b.subscribe('a.events', 'h', noop)).toThrow(/already subscribes/);
  });

  it('is down and refuses to send before start, and closes without having started', async () => {
    const b = bus();
    expect(b.health().up).toBe(false);
    await expect(b.publish('t', { type: 'x', key: 'k', payload: {} })).rejects.toMatchObject({ code: 'dependency_unavailable' });
    await b.close();
    await b.close();
    expect(b.health()).toEqual({ up: false, detail: 'kafka bus is stopped' });
  });

  it('names its reply topic after the client and instance', () => {
    expect(new KafkaBus({ brokers: ['127.0.0.1:1'], clientId: 'gateway', instanceId: 'pod-1' }).replyTopic).toBe('replies.gateway.pod-1');
  });
});

/** A stand-in for a kafkajs producer: `broken` topics fail with "unknown topic", like a poisoned producer. */
class FakeProducer implements ProducerHandle<{ topic: string }> {
  static created: FakeProducer[] = [];
  connected = false;
  sent: string[] = [];
  constructor(private readonly fails: (topic: string, producer: FakeProducer) => boolean) {
    FakeProducer.created.push(this);
  }
  async connect(): Promise<void> {
    this.connected = true;
  }
  async disconnect(): Promise<void> {
    this.connected = false;
  }
  async send(record: { topic: string }): Promise<unknown> {
    await new Promise((resolve) => setImmediate(resolve));
    if (this.fails(record.topic, this)) throw unknownTopicError(record.topic);
    this.sent.push(record.topic);
    return [];
  }
  isConnected(): boolean {
    return this.connected;
  }
}

describe('RenewingProducer', () => {
  beforeEach(() => {
    FakeProducer.created = [];
  });

  const renewing = (fails: (topic: string, producer: FakeProducer) => boolean, now = () => 0) => {
    const renewals: unknown[] = [];
    const producer = new RenewingProducer<{ topic: string }>({
      create: () => new FakeProducer(fails),
      topicOf: (record) => record.topic,
      onRenew: (error) => renewals.push(error),
      now,
    });
    return { producer, renewals };
  };

  it('replaces a producer that a deleted topic broke, and retries the send on the new one', async () => {
    // Only the first producer is "poisoned": it fails for every topic.
    const { producer, renewals } = renewing((_topic, p) => p === FakeProducer.created[0]);
    await producer.connect();
    await expect(producer.send({ topic: 'replies.b' })).resolves.toEqual([]);
    expect(renewals).toHaveLength(1);
    expect(FakeProducer.created).toHaveLength(2);
    expect(FakeProducer.created[0].connected).toBe(false);
    expect(FakeProducer.created[1].sent).toEqual(['replies.b']);
    expect(producer.isConnected()).toBe(true);
  });

  it('renews once for concurrent failures', async () => {
    const { producer, renewals } = renewing((_topic, p) => p === FakeProducer.created[0]);
    await producer.connect();
    await Promise.all(['a', 'b', 'c'].map((topic) => producer.send({ topic })));
    expect(renewals).toHaveLength(1);
    expect(FakeProducer.created).toHaveLength(2);
    expect(FakeProducer.created[1].sent.sort()).toEqual(['a', 'b', 'c']);
  });

  it('remembers a topic that is really missing and fails at once until the memory expires', async () => {
    let clock = 0;
    const { producer } = renewing(
      (topic) => topic === 'gone',
      () => clock,
    );
    await producer.connect();
    await expect(producer.send({ topic: 'gone' })).rejects.toMatchObject({ type: 'UNKNOWN_TOPIC_OR_PARTITION' });
    expect(FakeProducer.created).toHaveLength(2);
    await expect(producer.send({ topic: 'gone' })).rejects.toThrow('Topic gone does not exist');
    expect(FakeProducer.created).toHaveLength(2); // no renewal, no round trip
    await expect(producer.send({ topic: 'fine' })).resolves.toEqual([]);
    clock = 60_001;
    await expect(producer.send({ topic: 'gone' })).rejects.toMatchObject({ type: 'UNKNOWN_TOPIC_OR_PARTITION' });
    expect(FakeProducer.created).toHaveLength(3);
  });

  it('replaces a producer whose sequence numbers the broker no longer accepts: that send fails, the next ones go out on the new one', async () => {
    const stuck = Object.assign(new KafkaJSProtocolError('The broker received an out of order sequence number'), { type: 'OUT_OF_ORDER_SEQUENCE_NUMBER' });
    const created: string[][] = [];
    const renewals: unknown[] = [];
    const producer = new RenewingProducer<{ topic: string }>({
      create: () => {
        const sent: string[] = [];
        const index = created.push(sent) - 1;
        return {
          connect: async () => undefined,
          disconnect: async () => undefined,
          isConnected: () => true,
          send: async (record) => {
            if (index === 0) throw stuck;
            sent.push(record.topic);
            return [];
          },
        };
      },
      topicOf: (record) => record.topic,
      onRenew: (error) => renewals.push(error),
    });
    await producer.connect();
    await expect(producer.send({ topic: 'mission.requests' })).rejects.toBe(stuck);
    await expect(producer.send({ topic: 'mission.requests' })).resolves.toEqual([]);
    expect(renewals).toEqual([stuck]);
    expect(created).toEqual([[], ['mission.requests']]);
  });

  it('passes other errors through and refuses to send once disconnected', async () => {
    const producer = new RenewingProducer<{ topic: string }>({
      create: () => ({ connect: async () => undefined, disconnect: async () => undefined, isConnected: () => true, send: async () => Promise.reject(new Error('broker down')) }),
      topicOf: (record) => record.topic,
    });
    await producer.connect();
    await expect(producer.send({ topic: 't' })).rejects.toThrow('broker down');
    await producer.disconnect();
    expect(producer.isConnected()).toBe(false);
    await expect(producer.send({ topic: 't' })).rejects.toThrow('not connected');
  });
});

describe('BatchingSender', () => {
  const turn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
  type Flushed = Array<{ topic: string; messages: number[] }>;

  function gated(): { sender: (options?: ConstructorParameters<typeof BatchingSender<number>>[1]) => BatchingSender<number>; flushed: Flushed[]; release: () => void } {
    const flushed: Flushed[] = [];
    const gates: Array<() => void> = [];
    return {
      flushed,
      release: () => gates.shift()?.(),
      sender: (options) =>
        new BatchingSender<number>(async (batch) => {
          flushed.push(batch.map(({ topic, messages }) => ({ topic, messages: [...messages] })));
          await new Promise<void>((resolve) => gates.push(resolve));
        }, options),
    };
  }

  it('sends what one turn of the event loop sends, across topics, as one batch, in call order', async () => {
    const { sender: make, flushed, release } = gated();
    const sender = make();
    const sends = [sender.send('t', [1]), sender.send('u', [9]), sender.send('t', [2, 3])];
    expect(flushed).toEqual([]);
    await turn();
    expect(flushed).toEqual([
      [
        { topic: 't', messages: [1, 2, 3] },
        { topic: 'u', messages: [9] },
      ],
    ]);
    release();
    await Promise.all(sends);
  });

  it('keeps one batch in flight by default and sends what arrived meanwhile next, together', async () => {
    const { sender: make, flushed, release } = gated();
    const sender = make();
    const first = sender.send('t', [1]);
    await turn();
    const rest = [sender.send('t', [2]), sender.send('t', [3])];
    await turn();
    expect(flushed).toHaveLength(1);
    release();
    await first;
    await turn();
    expect(flushed[1]).toEqual([{ topic: 't', messages: [2, 3] }]);
    release();
    await Promise.all(rest);
  });

  it('sends each topic in its own batch when asked, side by side up to the in-flight limit', async () => {
    const { sender: make, flushed, release } = gated();
    const sender = make({ perTopic: true, maxInFlight: 2 });
    const sends = [sender.send('t', [1]), sender.send('u', [2]), sender.send('v', [3])];
    await turn();
    expect(flushed).toEqual([[{ topic: 't', messages: [1] }], [{ topic: 'u', messages: [2] }]]);
    release();
    await sends[0];
    await turn();
    expect(flushed[2]).toEqual([{ topic: 'v', messages: [3] }]);
    release();
    release();
    await Promise.all(sends);
  });

  it('keeps one batch in flight per topic when asked, gathering what the topic is sent meanwhile, while other topics go', async () => {
    const { sender: make, flushed, release } = gated();
    const sender = make({ perTopic: true, maxInFlight: 8 });
    const first = sender.send('t', [1]);
    await turn();
    const later = [sender.send('t', [2]), sender.send('u', [9]), sender.send('t', [3, 4])];
    await turn();
    // 't' waits for its request in flight; 'u' does not wait for it.
    expect(flushed).toEqual([[{ topic: 't', messages: [1] }], [{ topic: 'u', messages: [9] }]]);
    release();
    await first;
    await turn();
    expect(flushed[2]).toEqual([{ topic: 't', messages: [2, 3, 4] }]);
    release();
    release();
    await Promise.all(later);
  });

  it('keeps a topic’s sends in order when its next batch is full, with other topics passing it', async () => {
    const { sender: make, flushed, release } = gated();
    const sender = make({ perTopic: true, maxInFlight: 8, maxMessages: 2 });
    const sends = [sender.send('t', [1, 2]), sender.send('t', [3]), sender.send('u', [9]), sender.send('t', [4])];
    await turn();
    expect(flushed).toEqual([[{ topic: 't', messages: [1, 2] }], [{ topic: 'u', messages: [9] }]]);
    release();
    await sends[0];
    await turn();
    expect(flushed[2]).toEqual([{ topic: 't', messages: [3, 4] }]);
    release();
    release();
    await Promise.all(sends);
  });

  it('rejects every caller of a failed batch and carries on with the next one', async () => {
    let calls = 0;
    const sender = new BatchingSender<number>(async () => {
      calls++;
      await turn();
      if (calls === 2) throw new Error('batch failed');
    });
    const first = sender.send('t', [1]);
    await turn();
    const second = sender.send('t', [2]);
    const third = sender.send('u', [3]);
    await expect(first).resolves.toBeUndefined();
    await expect(second).rejects.toThrow('batch failed');
    await expect(third).rejects.toThrow('batch failed');
    await expect(sender.send('t', [4])).resolves.toBeUndefined();
  });

  it('frees a topic whose per-topic batch failed, by a rejection or a throw, for its next send', async () => {
    let calls = 0;
    const sender = new BatchingSender<number>(
      (batch) => {
        calls++;
        if (calls === 1) return Promise.reject(new Error('rejected'));
        if (calls === 2) throw new Error('thrown');
        return Promise.resolve(batch);
      },
      { perTopic: true, maxInFlight: 4 },
    );
    await expect(sender.send('t', [1])).rejects.toThrow('rejected');
    await expect(sender.send('t', [2])).rejects.toThrow('thrown');
    await expect(sender.send('t', [3])).resolves.toBeUndefined();
  });

  it('fails only the sends of a per-topic batch whose topic failed', async () => {
    const sender = new BatchingSender<number>(
      async (batch) => {
        if (batch[0].topic === 'gone') throw new Error('unknown topic');
      },
      { perTopic: true, maxInFlight: 4 },
    );
    const [ok, gone] = [sender.send('here', [1]), sender.send('gone', [2])];
    await expect(ok).resolves.toBeUndefined();
    await expect(gone).rejects.toThrow('unknown topic');
  });

  it('caps a batch at the maximum message count, never splitting one send', async () => {
    const sizes: number[] = [];
    const sender = new BatchingSender<number>(
      async (batch) => {
        sizes.push(batch.reduce((sum, { messages }) => sum + messages.length, 0));
        await turn();
      },
      { maxMessages: 3 },
    );
    await Promise.all([sender.send('t', [0, 1, 2, 3]), ...Array.from({ length: 7 }, (_, n) => sender.send('t', [n]))]);
    expect(sizes).toEqual([4, 3, 3, 1]);
  });
});
