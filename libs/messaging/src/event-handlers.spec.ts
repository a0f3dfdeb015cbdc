import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { IncomingMessage } from './bus';
import { deliverWithRetries, PoisonMessageError } from './delivery';
import { eventHandlers } from './event-handlers';

const schemas = {
  'order.placed': z.object({ orderId: z.uuid(), lines: z.int().min(1) }),
  'order.shipped': z.object({ orderId: z.uuid() }),
};

function event(type: string, payload: unknown): IncomingMessage {
  return { id: randomUUID(), topic: 'orders.events.v1', type, key: 'tenant:order', payload, headers: { 'tenant-id': randomUUID() }, attempt: 1 };
}

describe('eventHandlers', () => {
  const placed: Array<{ event: unknown; message: IncomingMessage }> = [];
  const handler = eventHandlers(schemas, { 'order.placed': async (order, message) => void placed.push({ event: order, message }) });

  beforeEach(() => (placed.length = 0));

  it('hands the handler of the type its checked payload, without fields its schema does not know, and the message', async () => {
    const orderId = randomUUID();
    const message = event('order.placed', { orderId, lines: 2, giftWrap: true });
    await handler(message);
    expect(placed).toEqual([{ event: { orderId, lines: 2 }, message }]);
  });

  it('names the types it handles, so a bus passes others by unread; a type given no handler is not among them', () => {
    expect([...(handler.eventTypes ?? [])]).toEqual(['order.placed']);
    const none = eventHandlers(schemas, { 'order.shipped': undefined });
    expect(none.eventTypes?.size).toBe(0);
  });

  it.each(['order.shipped', 'order.returned', 'constructor', 'toString'])('ignores %s, which it has no handler for, whatever its payload', async (type) => {
    await expect(handler(event(type, null))).resolves.toBeUndefined();
    expect(placed).toEqual([]);
  });

  it('refuses a payload that fails its schema as a poison message naming the type and the fields, without calling the handler', async () => {
    const refusal = handler(event('order.placed', { orderId: 'o-1', lines: 0 }));
    await expect(refusal).rejects.toBeInstanceOf(PoisonMessageError);
    await expect(refusal).rejects.toThrow(/^The order\.placed payload does not match its schema \(orderId: .+; lines: .+\)$/);
    await expect(handler(event('order.placed', null))).rejects.toThrow(/\(\(body\): /);
    expect(placed).toEqual([]);
  });

  it('has the bus dead-letter a poison message after one delivery, without retrying it', async () => {
    const deliveries: number[] = [];
    const counting = async (message: IncomingMessage): Promise<void> => {
      deliveries.push(message.attempt);
      await handler(message);
    };
    const { attempt: _first, ...message } = event('order.placed', { lines: 1 });
    const outcome = await deliverWithRetries(message, counting, { attempts: 5, initialBackoffMs: 1, maxBackoffMs: 1 }, () => false);
    expect(outcome).toMatchObject({ outcome: 'failed', attempts: 1, error: expect.any(PoisonMessageError) });
    expect(deliveries).toEqual([1]);
  });
});
