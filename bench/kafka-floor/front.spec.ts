import type { Message } from 'kafkajs';
import { FloorRequester } from './front';
import { CORRELATION_HEADER, FLOOR_REQUESTS_TOPIC, REPLY_TO_HEADER } from './wire';

describe('the Kafka floor’s requester', () => {
  function requester(send: (topic: string, messages: readonly Message[]) => Promise<void> = async () => undefined, timeoutMs = 10_000) {
    const sent: Array<{ topic: string; message: Message }> = [];
    const floor = new FloorRequester(
      {
        send: (topic, messages) => {
          for (const message of messages) sent.push({ topic, message });
          return send(topic, messages);
        },
      },
      'bench.floor.replies.1',
      timeoutMs,
    );
    return { floor, sent };
  }

  const reply = (correlation: unknown, value: string) => ({ headers: { [CORRELATION_HEADER]: Buffer.from(String(correlation)) }, value: Buffer.from(value) });

  it('sends each request as one record naming its reply topic, and answers it with the reply that carries its correlation id', async () => {
    const { floor, sent } = requester();
    const first = floor.request('m-1');
    const second = floor.request('m-2');
    expect(sent.map(({ topic, message }) => [topic, message.value, message.headers?.[REPLY_TO_HEADER]])).toEqual([
      [FLOOR_REQUESTS_TOPIC, 'm-1', 'bench.floor.replies.1'],
      [FLOOR_REQUESTS_TOPIC, 'm-2', 'bench.floor.replies.1'],
    ]);
    // A key of its own per record, as the bus's requests: they spread over the partitions.
    expect(new Set(sent.map(({ message }) => message.key)).size).toBe(2);
    expect(floor.pending).toBe(2);
    const [one, two] = sent.map(({ message }) => message.headers?.[CORRELATION_HEADER]);
    expect(one).not.toBe(two);
    // Out of order, with a stranger and a repeat in between: each request gets its own reply, once.
    floor.answer(reply(two, 'second'));
    floor.answer(reply('unknown', 'nobody'));
    floor.answer(reply(one, 'first'));
    floor.answer(reply(one, 'again'));
    await expect(first).resolves.toBe('first');
    await expect(second).resolves.toBe('second');
    expect(floor.pending).toBe(0);
  });

  it('gives up on a request whose reply does not come in time', async () => {
    const { floor } = requester(undefined, 20);
    await expect(floor.request('m-1')).rejects.toThrow('No reply within 20 ms');
    expect(floor.pending).toBe(0);
  });

  it('fails a request whose record could not be sent, and ignores a reply that comes for it later', async () => {
    const { floor, sent } = requester(async () => {
      throw new Error('broker away');
    });
    await expect(floor.request('m-1')).rejects.toThrow('broker away');
    expect(floor.pending).toBe(0);
    floor.answer(reply(sent[0]?.message.headers?.[CORRELATION_HEADER], 'late'));
    expect(floor.pending).toBe(0);
  });
});
