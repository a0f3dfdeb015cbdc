import type { z } from 'zod';
import { fieldErrors, parseOrThrow, type CheckedPayloadOf, type CheckedReplyOf, type MessageDefinition, type PayloadOf, type ReplyOf, type Topic } from '@mission/contracts';
import type { IncomingMessage, MessageBus, RequestHandler, RequestOptions } from './bus';
import { checkOnce, immutable } from './immutable';

/** A reply that does not match its message's reply schema: a defect of the service that sent it, never the caller's. */
export class InvalidReplyError extends Error {
  constructor(type: string, error: z.ZodError) {
    const fields = fieldErrors(error)
      .map((issue) => `${issue.field}: ${issue.message}`)
      .join('; ');
    super(`The reply to ${type} does not match its schema (${fields})`);
    this.name = 'InvalidReplyError';
  }
}

function checkedReply<M extends MessageDefinition>(message: M, reply: unknown): CheckedReplyOf<M> {
  const result = checkOnce(message.reply, reply);
  if (!result.success) throw new InvalidReplyError(message.type, result.error);
  return result.data as CheckedReplyOf<M>;
}

/**
 * Sends `message` and waits for its reply. The payload is checked against the message's schema
 * here (a mismatch fails with `validation_failed` before anything is sent) and again by the
 * serving handler; the reply was checked by the handler that sent it (requestHandlers) and is
 * typed by the reply schema here. It is not checked a second time: during a rolling upgrade a
 * newer service may answer with a value this side's schema does not know yet (a new status, a
 * new field), and refusing it would turn every such answer into a failure for the client.
 *
 * What the check made is frozen and marked immutable before it is sent, with whatever it holds of
 * `payload` itself (a field the schema leaves unknown, such as a submitted mission's body): the
 * caller must not change `payload` afterwards. On the in-process bus the handler gets the frozen
 * value; its own check copies what its schema describes, and what that leaves unknown stays frozen.
 */
export async function requestMessage<M extends MessageDefinition>(bus: MessageBus, message: M, payload: PayloadOf<M>, options?: RequestOptions): Promise<CheckedReplyOf<M>> {
  // Frozen and marked immutable, it goes to an in-process handler as it is instead of as a JSON copy (see InProcessBus).
  const checked: unknown = immutable(parseOrThrow(message.payload, payload, message.payloadLabel));
  return bus.request<CheckedReplyOf<M>>(message.topic, message.type, checked, options);
}

/** One message's handler, typed by its definition. */
export interface MessageHandler<M extends MessageDefinition = MessageDefinition> {
  readonly message: M;
  readonly handle: (payload: CheckedPayloadOf<M>, incoming: IncomingMessage) => Promise<ReplyOf<M>>;
}

/** Binds a handler to its message: the payload it gets and the reply it answers are those the message defines. */
export function on<M extends MessageDefinition>(message: M, handle: (payload: CheckedPayloadOf<M>, incoming: IncomingMessage) => Promise<ReplyOf<M>>): MessageHandler<M> {
  return { message, handle };
}

/**
 * The handlers of one request topic, for `bus.serve`: each checks its payload (a mismatch is
 * answered `validation_failed`, the handler never runs) and its own reply (a mismatch is answered
 * `internal_error`, so a service never sends a reply its callers would refuse). A handler for a
 * message of another topic, or two for one message, fail at registration.
 */
export function requestHandlers(topic: Topic, handlers: ReadonlyArray<AnyMessageHandler>): Record<string, RequestHandler> {
  const table: Record<string, RequestHandler> = {};
  for (const { message, handle } of handlers) {
    if (message.topic !== topic) throw new Error(`${message.type} is a request of ${message.topic}, not of ${topic}`);
    if (table[message.type]) throw new Error(`Two handlers for ${message.type}`);
    // The one place the payload's type is asserted: it has just been checked against the schema `on` typed the handler with.
    const typed = handle as (payload: unknown, incoming: IncomingMessage) => Promise<unknown>;
    table[message.type] = async (incoming) => checkedReply(message, await typed(parseOrThrow(message.payload, incoming.payload, message.payloadLabel), incoming));
  }
  return table;
}

/** A handler of any message (what `on` returns, whatever its message). */
export interface AnyMessageHandler {
  readonly message: MessageDefinition;
  readonly handle: (payload: never, incoming: IncomingMessage) => Promise<unknown>;
}
