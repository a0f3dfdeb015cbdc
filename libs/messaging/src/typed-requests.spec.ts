import { randomUUID } from 'node:crypto';
import { DomainError, ErrorCode, type MessageDefinition, Messages, Topics } from '@mission/contracts';
import { runWithTenant } from '@mission/tenant-context';
import { z } from 'zod';
import { InProcessBroker, InProcessBus } from './in-process/in-process-bus';
import { immutable, isImmutable } from './immutable';
import { on, requestHandlers, requestMessage } from './typed-requests';

const silent = { warn: () => undefined, error: () => undefined };
const tenantId = randomUUID();

/** A request of its own topic, so that each test serves it on a fresh pair of buses. */
function echo(topic: string): MessageDefinition<z.ZodObject<{ n: z.ZodInt }>, z.ZodObject<{ doubled: z.ZodInt }>> {
  return {
    topic: topic as MessageDefinition['topic'],
    type: 'test.double',
    payload: z.strictObject({ n: z.int().min(0) }),
    reply: z.object({ doubled: z.int() }),
    payloadLabel: 'Number',
  };
}

async function failureOf(promise: Promise<unknown>): Promise<unknown> {
  return promise.then(
    () => {
      throw new Error('expected a failure');
    },
    (error: unknown) => error,
  );
}

describe('typed requests', () => {
  let server: InProcessBus;
  let client: InProcessBus;
  let message: ReturnType<typeof echo>;
  const handled: unknown[] = [];

  async function start(answer: (n: number) => unknown): Promise<void> {
    const broker = new InProcessBroker();
    message = echo(`typed.${randomUUID()}`);
    server = new InProcessBus(broker, { logger: silent });
    client = new InProcessBus(broker, { logger: silent });
    server.serve(
      message.topic,
      'server',
      // The raw handler of what `requestHandlers` builds, with a reply the test chooses (a defect when it is not a number).
      requestHandlers(message.topic, [on(message, async ({ n }) => (handled.push(n), answer(n) as { doubled: number }))]),
    );
    await server.start();
    await client.start();
  }

  afterEach(async () => {
    handled.length = 0;
    await client.close();
    await server.close();
  });

  it('answers with the checked reply', async () => {
    await start((n) => ({ doubled: 2 * n }));
    await expect(runWithTenant({ tenantId }, () => requestMessage(client, message, { n: 21 }))).resolves.toEqual({ doubled: 42 });
    expect(handled).toEqual([21]);
  });

  it('refuses a payload that does not match its schema before it is sent, naming the fields', async () => {
    await start((n) => ({ doubled: 2 * n }));
    const error = await failureOf(runWithTenant({ tenantId }, () => requestMessage(client, message, { n: -1 })));
    expect(error).toBeInstanceOf(DomainError);
    expect(error).toMatchObject({ code: ErrorCode.ValidationFailed, message: 'Number is invalid', errors: [{ field: 'n' }] });
    expect(handled).toEqual([]);
  });

  it('refuses on the serving side a payload another sender did not check, before the handler', async () => {
    await start((n) => ({ doubled: 2 * n }));
    const error = await failureOf(runWithTenant({ tenantId }, () => client.request(message.topic, message.type, { n: 'x', extra: true })));
    expect(error).toMatchObject({ code: ErrorCode.ValidationFailed, errors: [{ field: 'n' }, { field: 'extra' }] });
    expect(handled).toEqual([]);
  });

  it('never sends a reply its callers would refuse: a handler answering off its schema is an internal error', async () => {
    await start(() => ({ doubled: 'many' }));
    const error = await failureOf(runWithTenant({ tenantId }, () => requestMessage(client, message, { n: 1 })));
    expect(error).toMatchObject({ code: ErrorCode.Internal });
    expect(handled).toEqual([1]);
  });

  it('checks an immutable reply (a cached final value) once, and every reply that may change each time', async () => {
    const cached = immutable({ doubled: 84 });
    await start((n) => (n === 42 ? cached : { doubled: 2 * n }));
    const check = jest.spyOn(message.reply, 'safeParse');
    for (let i = 0; i < 3; i++) await expect(runWithTenant({ tenantId }, () => requestMessage(client, message, { n: 42 }))).resolves.toEqual({ doubled: 84 });
    expect(check).toHaveBeenCalledTimes(1);
    for (let i = 0; i < 2; i++) await runWithTenant({ tenantId }, () => requestMessage(client, message, { n: 1 }));
    expect(check).toHaveBeenCalledTimes(3);
    check.mockRestore();
  });

  it('passes a reply this side’s schema does not know yet through unchanged (a newer service during a rolling upgrade)', async () => {
    const broker = new InProcessBroker();
    message = echo(`typed.${randomUUID()}`);
    server = new InProcessBus(broker, { logger: silent });
    client = new InProcessBus(broker, { logger: silent });
    server.serve(message.topic, 'server', { [message.type]: async () => ({ doubled: 2, unit: 'pairs' }) });
    await server.start();
    await client.start();
    await expect(runWithTenant({ tenantId }, () => requestMessage(client, message, { n: 1 }))).resolves.toEqual({ doubled: 2, unit: 'pairs' });
  });

  it('sends the checked payload frozen and marked immutable, the caller’s unknown fields frozen with it', async () => {
    await start((n) => ({ doubled: n * 2 }));
    const sent: unknown[] = [];
    const recording = { request: async (_topic: string, _type: string, payload: unknown) => (sent.push(payload), { doubled: 2 }) } as unknown as InProcessBus;
    const body = { title: 'kept', nested: { words: ['a'] } };
    const carrying: MessageDefinition = { ...message, payload: z.strictObject({ n: z.int(), body: z.unknown() }) };
    await runWithTenant({ tenantId }, () => requestMessage(recording, carrying, { n: 1, body } as never));
    expect(sent).toEqual([{ n: 1, body }]);
    expect(isImmutable(sent[0])).toBe(true);
    expect(Object.isFrozen(sent[0])).toBe(true);
    expect(Object.isFrozen(body.nested.words)).toBe(true);
  });

  it('refuses at registration a handler of another topic, and two handlers of one message', () => {
    expect(() => requestHandlers(Topics.hitRequests, [on(Messages.missionGet, async () => ({}) as never)])).toThrow(
      'mission.get is a request of mission.requests.v1, not of hit.requests.v1',
    );
    const twice = on(Messages.hitGet, async () => ({}) as never);
    expect(() => requestHandlers(Topics.hitRequests, [twice, twice])).toThrow('Two handlers for hit.get');
  });
});
