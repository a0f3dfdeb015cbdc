/**
 * Pure pieces of the Kafka adapter: how bus messages map to kafkajs records and back, topic
 * naming, log mapping and small promise helpers. No I/O here, so all of it is unit-tested.
 */
import type { IHeaders, KafkaMessage, LogEntry } from 'kafkajs';
import { Headers, IncomingMessage } from '../bus';
import { describe, deserialize, REPLY_TOPIC_PREFIX } from '../delivery';

export { REQUEST_DEADLINE_HEADER, requestExpired } from '../delivery';

export interface TopicSpec {
  readonly name: string;
  readonly partitions: number;
  /** The topic's `max.message.bytes` when it must exceed the broker's default (about 1 MiB). */
  readonly maxMessageBytes?: number;
}

/** kafkajs hands headers over as Buffers (or arrays of them for repeated keys): turn them into strings. */
export function headersFromKafka(headers: IHeaders | undefined): Record<string, string> {
  const result: Record<string, string> = {};
  if (!headers) return result;
  for (const [name, raw] of Object.entries(headers)) {
    // A repeated header keeps its last value, as Kafka's own `lastHeader()` does.
    const value = Array.isArray(raw) ? raw[raw.length - 1] : raw;
    if (value === undefined || value === null) continue;
    result[name] = typeof value === 'string' ? value : value.toString('utf8');
  }
  return result;
}

/**
 * The bus view of a consumed record, with its payload as the codec read it (plain JSON by default;
 * throws on a poison record), and its headers as headersFromKafka reads them (passed in when the
 * caller has read them already).
 */
export function incomingFromKafka(
  topic: string,
  partition: number,
  message: KafkaMessage,
  payload: unknown = deserialize(message.value),
  headers: Readonly<Record<string, string>> = headersFromKafka(message.headers),
): Omit<IncomingMessage, 'attempt'> {
  return {
    id: headers[Headers.messageId] ?? `${topic}/${partition}/${message.offset}`,
    topic,
    type: headers[Headers.messageType] ?? '',
    key: message.key?.toString('utf8') ?? '',
    payload,
    headers,
  };
}

/** The original headers plus why and after how many deliveries the message was given up. */
export function deadLetterHeaders(headers: Readonly<Record<string, string>>, error: unknown, attempts: number): Record<string, string> {
  return { ...headers, [Headers.error]: describe(error), [Headers.attempts]: String(attempts) };
}

const MAX_TOPIC_LENGTH = 249;

/** Makes a string usable inside a topic name (Kafka allows `[a-zA-Z0-9._-]`). */
export function topicNamePart(value: string): string {
  const safe = value.replace(/[^a-zA-Z0-9._-]/g, '-');
  return safe.length > 0 ? safe : '-';
}

/** The per-instance reply topic, `replies.<clientId>.<instanceId>`. */
export function replyTopicName(clientId: string, instanceId: string): string {
  return `${REPLY_TOPIC_PREFIX}${topicNamePart(clientId)}.${topicNamePart(instanceId)}`.slice(0, MAX_TOPIC_LENGTH);
}

/** One entry per topic name; a name listed twice keeps its largest partition count and message size. */
export function mergeTopicSpecs(specs: Iterable<TopicSpec>): TopicSpec[] {
  const byName = new Map<string, TopicSpec>();
  for (const { name, partitions, maxMessageBytes } of specs) {
    if (!Number.isInteger(partitions) || partitions < 1) throw new Error(`Topic ${name} needs a positive partition count, got ${partitions}`);
    const known = byName.get(name);
    const largest = Math.max(maxMessageBytes ?? 0, known?.maxMessageBytes ?? 0);
    byName.set(name, { name, partitions: Math.max(partitions, known?.partitions ?? 0), ...(largest > 0 ? { maxMessageBytes: largest } : {}) });
  }
  return [...byName.values()];
}

/** kafkajs log levels (ERROR = 1, WARN = 2, INFO = 4, DEBUG = 5), without importing its enum. */
const KAFKAJS_ERROR = 1;
const KAFKAJS_WARN = 2;

export interface BusLogEntry {
  readonly level: 'warn' | 'error';
  readonly message: string;
  readonly context: Record<string, unknown>;
}

/** A kafkajs log entry as a structured BusLogger entry; undefined below WARN. */
export function busLogEntry(entry: Pick<LogEntry, 'namespace' | 'level' | 'log'>): BusLogEntry | undefined {
  if (entry.level !== KAFKAJS_ERROR && entry.level !== KAFKAJS_WARN) return undefined;
  const { message, timestamp: _timestamp, logger: _logger, ...extra } = entry.log;
  const context: Record<string, unknown> = { source: 'kafkajs' };
  if (entry.namespace) context.namespace = entry.namespace;
  for (const [name, value] of Object.entries(extra)) {
    if (value !== undefined) context[name] = value instanceof Error ? describe(value) : value;
  }
  // kafkajs's connection logs every protocol error response ("Response Heartbeat(…)": rebalancing,
  // topic already exists, …) at ERROR, although the same error reaches the caller, which retries
  // or reports it. Those are warnings here; errors the caller cannot handle are logged again by it.
  const protocolResponse = entry.namespace === 'Connection' && String(message).startsWith('Response ');
  const level = entry.level === KAFKAJS_ERROR && !protocolResponse ? 'error' : 'warn';
  return { level, message: String(message), context };
}

/** Whether a kafkajs error (or one it wraps) says the topic does not exist. */
export function isUnknownTopicError(error: unknown): boolean {
  return hasErrorType(error, (type) => type === 'UNKNOWN_TOPIC_OR_PARTITION');
}

/**
 * Broker answers that leave a kafkajs idempotent producer unable to send again: it keeps its
 * producer id and sequence numbers and fails every later batch the same way (kafkajs marks them
 * non-retriable and never re-initialises). Seen after a broker restart loses the producer's state.
 */
const STUCK_PRODUCER_ERRORS: ReadonlySet<string> = new Set(['OUT_OF_ORDER_SEQUENCE_NUMBER', 'UNKNOWN_PRODUCER_ID', 'INVALID_PRODUCER_EPOCH', 'INVALID_PRODUCER_ID_MAPPING']);

export function isStuckProducerError(error: unknown): boolean {
  return hasErrorType(error, (type) => STUCK_PRODUCER_ERRORS.has(type));
}

/** Whether `error` or one of its causes is a kafkajs protocol error of a matching type. */
function hasErrorType(error: unknown, matches: (type: string) => boolean): boolean {
  const seen = new Set<unknown>();
  let current: unknown = error;
  while (typeof current === 'object' && current !== null && !seen.has(current)) {
    seen.add(current);
    const type = (current as { type?: unknown }).type;
    if (typeof type === 'string' && matches(type)) return true;
    current = (current as { cause?: unknown }).cause ?? (current as { originalError?: unknown }).originalError;
  }
  return false;
}

/** Settles like `promise`, or rejects with `onTimeout()` after `ms`. The work itself is not cancelled. */
export function withTimeout<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(onTimeout()), ms);
    promise.then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (error: unknown) => {
        clearTimeout(timer);
        reject(error);
      },
    );
  });
}

/**
 * Runs `work` while calling `beat` every `intervalMs`, so a long handler keeps its consumer in
 * the group. Failures of `beat` are ignored here: the consumer loop sees a rebalance itself.
 */
export async function whileBeating<T>(beat: () => Promise<void>, intervalMs: number, work: () => Promise<T>): Promise<T> {
  const timer = setInterval(() => {
    beat().catch(() => undefined);
  }, intervalMs);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}

/** kafkajs runs this many partitions at once: one per partition, within sane bounds. */
export function partitionConcurrency(partitions: number | undefined): number {
  return Math.min(16, Math.max(2, partitions ?? 2));
}
