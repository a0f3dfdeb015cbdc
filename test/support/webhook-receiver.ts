import { createHmac, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedWebhook {
  readonly headers: http.IncomingHttpHeaders;
  readonly body: string;
  /** The status it was answered with. */
  readonly answered: number;
}

/**
 * An HTTP endpoint that records what it is sent and answers each request with the next status of
 * `plan` (then 204): what a tenant's webhook receiver would be, on loopback.
 */
export interface WebhookReceiver {
  readonly url: string;
  readonly received: ReceivedWebhook[];
  /** Statuses for the next requests, in order. */
  answerNext(...statuses: number[]): void;
  waitFor(predicate: (received: readonly ReceivedWebhook[]) => boolean, timeoutMs?: number): Promise<ReceivedWebhook[]>;
  close(): Promise<void>;
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const received: ReceivedWebhook[] = [];
  const plan: number[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const answered = plan.shift() ?? 204;
      received.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8'), answered });
      response.statusCode = answered;
      response.end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    received,
    answerNext: (...statuses) => plan.push(...statuses),
    waitFor: async (predicate, timeoutMs = 20_000) => {
      const deadline = Date.now() + timeoutMs;
      while (!predicate(received)) {
        if (Date.now() > deadline) throw new Error(`Timed out; received ${JSON.stringify(received.map((r) => r.headers['webhook-id']))}`);
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      return [...received];
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Whether a delivery carries a valid Standard Webhooks signature under `secret`: checked from the
 * specification with Node's crypto (HMAC-SHA256 over `<id>.<timestamp>.<body>` with the secret's
 * decoded bytes), not with the library that signed it.
 */
export function signatureIsValid(delivery: ReceivedWebhook, secret: string): boolean {
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64');
  const expected = createHmac('sha256', key).update(`${delivery.headers['webhook-id']}.${delivery.headers['webhook-timestamp']}.${delivery.body}`).digest();
  return String(delivery.headers['webhook-signature'] ?? '')
    .split(' ')
    .map((part) => part.split(','))
    .some(([version, value]) => {
      const given = Buffer.from(value ?? '', 'base64');
      return version === 'v1' && given.length === expected.length && timingSafeEqual(given, expected);
    });
}
