import { KafkaJSNumberOfRetriesExceeded, KafkaJSProtocolError } from 'kafkajs';
import { KafkaBus } from './kafka-bus';
import {
  busLogEntry,
  deadLetterHeaders,
  headersFromKafka,
  incomingFromKafka,
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
    expect(mergeTopicSpecs([{ name: 'a', partitions: 3 }, { name: 'b', partitions: 1 }, { name: 'a', partitions: 6 }])).toEqual([
      { name: 'a', partitions: 6 },
      { name: 'b', partitions: 1 },
    ]);
    expect(() => mergeTopicSpecs([{ name: 'a', partitions: 0 }])).toThrow(/positive partition count/);
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
    const entry = busLogEntry({ namespace: 'Connection', level: 1, log: { timestamp: 'now', message: 'Response Heartbeat(key: 12, version: 3)', error: 'The group is rebalancing' } });
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
    let beats = 0;
    const result = await whileBeating(
      async () => {
        beats++;
        throw new Error('rebalancing');
      },
      5,
      () => new Promise((resolve) => setTimeout(() => resolve('done'), 40)),
    );
    expect(result).toBe('done');
    expect(beats).toBeGreaterThanOrEqual(3);
    const after = beats;
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(beats).toBe(after);
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
