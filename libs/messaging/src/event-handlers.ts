import type { z } from 'zod';
import { fieldErrors } from '@mission/contracts';
import type { EventHandler, IncomingMessage } from './bus';
import { PoisonMessageError } from './delivery';

/** The payload schemas of a topic's events, by message type (e.g. MissionEventSchemas). */
export type EventSchemas = Readonly<Record<string, z.ZodType>>;

/** Handlers of the events a subscriber reacts to, each typed by its event's schema. */
export type TypedEventHandlers<S extends EventSchemas> = {
  readonly [T in keyof S]?: (event: z.output<S[T]>, message: IncomingMessage) => Promise<void>;
};

type CheckedHandler = (event: unknown, message: IncomingMessage) => Promise<void>;

/**
 * The handler of a subscription, for `bus.subscribe`: an event of a type in `handlers` reaches its
 * handler once its payload matches its schema; other types are ignored. A payload that does not
 * match can never be handled, however often it is retried: it is dead-lettered at once
 * (PoisonMessageError), with its type and the fields that failed. The handler names its types
 * (`eventTypes`), so the bus does not even open the payload of an event of any other type.
 */
export function eventHandlers<S extends EventSchemas>(schemas: S, handlers: TypedEventHandlers<S>): EventHandler {
  const table = new Map<string, { readonly schema: z.ZodType; readonly handle: CheckedHandler }>();
  for (const [type, handle] of Object.entries(handlers)) {
    // The one place an event's type is asserted: its payload is checked against this schema before the call.
    if (handle) table.set(type, { schema: schemas[type], handle: handle as CheckedHandler });
  }
  const handler = async (message: IncomingMessage): Promise<void> => {
    const entry = table.get(message.type);
    if (!entry) return;
    const checked = entry.schema.safeParse(message.payload);
    if (!checked.success) {
      const fields = fieldErrors(checked.error)
        .map((issue) => `${issue.field}: ${issue.message}`)
        .join('; ');
      throw new PoisonMessageError(`The ${message.type} payload does not match its schema (${fields})`);
    }
    await entry.handle(checked.data, message);
  };
  // Other types are passed by on the bus before their payload is opened.
  return Object.assign(handler, { eventTypes: new Set(table.keys()) as ReadonlySet<string> });
}
