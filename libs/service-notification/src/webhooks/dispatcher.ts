import http from 'node:http';
import https from 'node:https';
import { Webhook } from 'standardwebhooks';
import { DataSource } from 'typeorm';
import { DecryptionError } from '@mission/crypto';
import { deferWrite, RecordCipher, tenantTransaction } from '@mission/persistence';
import { runWithTenant } from '@mission/tenant-context';
import type { WebhookTargetPolicy } from './target-policy';
import type { WebhookSecrets } from './webhooks';

/** The contract's default: seconds before each retry after a failed attempt (WEBHOOK_RETRY_SCHEDULE). */
export const DEFAULT_RETRY_SCHEDULE_SECONDS: readonly number[] = [5, 300, 1800, 7200, 18000, 36000];

/** Attempts in flight at once on one replica, by default. */
export const DEFAULT_DISPATCH_CONCURRENCY = 64;

export interface DispatcherOptions {
  /** Seconds before each retry; after the last, the delivery is `failed`. */
  readonly retryScheduleSeconds: readonly number[];
  /** A 2xx must come within this long (the contract: 10 s). */
  readonly timeoutMs?: number;
  /** Attempts in flight at once on this replica (DEFAULT_DISPATCH_CONCURRENCY). */
  readonly concurrency?: number;
  /**
   * Attempts in flight at once to one webhook (1: its deliveries go out in order, one after the
   * other, retries aside); a slow endpoint holds no more, whatever it is sent.
   */
  readonly perWebhook?: number;
  /** Between looks for due deliveries when nothing kicks the dispatcher. */
  readonly pollMs?: number;
}

export interface DispatcherLogger {
  warn(message: string, context?: Record<string, unknown>): void;
  error(message: string, context?: Record<string, unknown>): void;
}

interface Leased {
  tenant_id: string;
  id: string;
  webhook_id: string;
  /** Counted by the lease: this attempt's number. */
  attempts: number;
  event_id: string;
  payload: string;
  sealed: string;
}

interface Attempt {
  readonly url: URL;
  readonly secret: string;
  readonly eventId: string;
  readonly body: string;
  readonly attempt: number;
}

/** The answer to one attempt: a status, or why there was none. */
export interface AttemptOutcome {
  readonly status?: number;
  readonly error?: string;
}

const USER_AGENT = 'Mission-Service-Webhooks/1';
/** A receiver's answer body is read this long at most, and this much, before its connection is closed. */
const BODY_GRACE_MS = 1_000;
const MAX_BODY_READ = 64 * 1024;

/**
 * What a failed connection is called in the delivery log: a fixed phrase, never the error's own
 * text (that names resolved addresses and the host of a URL that is otherwise kept sealed).
 */
export function attemptError(error: NodeJS.ErrnoException): string {
  const code = error.code ?? '';
  if (/is not allowed/.test(error.message)) return 'the target address is not allowed';
  if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'the name did not resolve';
  if (code === 'ECONNREFUSED') return 'the connection was refused';
  if (code === 'ECONNRESET' || code === 'EPIPE') return 'the connection was reset';
  if (code === 'ETIMEDOUT' || code === 'ENETUNREACH' || code === 'EHOSTUNREACH') return 'the target could not be reached';
  if (/^(ERR_TLS|ERR_SSL|CERT_|DEPTH_ZERO|SELF_SIGNED|UNABLE_TO|ERR_OSSL)/.test(code) || /certificate|TLS|SSL/i.test(error.message)) return 'TLS failed';
  return 'the connection failed';
}

/**
 * Resends an attempt may make after resets on kept-alive connections: each such reset closes that
 * connection for good, so the pool's idle connections to the host (64 at most) bound them; this
 * bounds them whatever the agent does. The attempt's timeout runs across them all.
 */
const MAX_STALE_CONNECTIONS = DEFAULT_DISPATCH_CONCURRENCY;

function isReset(error: NodeJS.ErrnoException): boolean {
  return error.code === 'ECONNRESET' || error.code === 'EPIPE';
}

/**
 * One signed POST (Standard Webhooks headers), answered within `timeoutMs`; redirects are not
 * followed. A reset on a kept-alive connection before any answer (most often one the receiver
 * closed just as it was reused, its keep-alive timeout running out) sends the same request again
 * at once on another connection, within the same attempt and timeout, as Node's documentation
 * advises for a reused socket. Delivery is at least once (the contract): a receiver that reset
 * after taking the request in sees it twice under one `webhook-id`, as it would on a retry. A
 * reset on a new connection is the attempt's answer.
 */
export function sendSigned(target: Attempt, policy: WebhookTargetPolicy, timeoutMs: number, now = new Date()): Promise<AttemptOutcome> {
  const signature = new Webhook(target.secret).sign(target.eventId, now, target.body);
  const secure = target.url.protocol === 'https:';
  return new Promise((resolve) => {
    let settled = false;
    let current: http.ClientRequest | undefined;
    const settle = (outcome: AttemptOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(outcome);
    };
    const send = (staleConnections: number): void => {
      const request = (secure ? https : http).request(
        target.url,
        {
          method: 'POST',
          agent: secure ? policy.agents.https : policy.agents.http,
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(target.body),
            'user-agent': USER_AGENT,
            'webhook-id': target.eventId,
            'webhook-timestamp': String(Math.floor(now.getTime() / 1000)),
            'webhook-signature': signature,
          },
        },
        (response) => {
          // Only the status matters. The body is read and dropped so that the connection can serve
          // the next delivery, unless it is long or slow: then the connection is closed, and a
          // receiver that trickles one holds nothing open here.
          settle({ status: response.statusCode ?? 0 });
          response.on('error', () => undefined);
          let read = 0;
          const cut = setTimeout(() => request.destroy(), BODY_GRACE_MS);
          response.on('data', (chunk: Buffer) => {
            read += chunk.length;
            if (read > MAX_BODY_READ) request.destroy();
          });
          response.on('close', () => clearTimeout(cut));
        },
      );
      current = request;
      request.on('error', (error) => {
        if (settled) return;
        if (request.reusedSocket && isReset(error) && staleConnections < MAX_STALE_CONNECTIONS) send(staleConnections + 1);
        else settle({ error: attemptError(error) });
      });
      request.end(target.body);
    };
    const timer = setTimeout(() => {
      current?.destroy();
      settle({ error: `no answer within ${timeoutMs} ms` });
    }, timeoutMs);
    send(0);
  });
}

/**
 * Sends the deliveries that are due, across tenants: each leased (so no other replica sends it
 * meanwhile), its attempt counted before the request goes out, then settled: succeeded on a 2xx,
 * otherwise retried after the schedule's next delay, or failed when the schedule is spent. A crash
 * mid-attempt leaves the lease to run out: the delivery is due again and goes on from the attempt
 * it counted. Attempts in flight are bounded per replica and per webhook, so a slow or failing
 * endpoint delays no other.
 */
export class WebhookDispatcher {
  private readonly timeoutMs: number;
  private readonly concurrency: number;
  private readonly perWebhook: number;
  private readonly pollMs: number;
  private readonly inFlight = new Map<string, number>();
  private readonly running = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | undefined;
  private passing: Promise<void> | undefined;
  private again = false;
  private stopped = true;

  constructor(
    private readonly dataSource: DataSource,
    private readonly cipher: RecordCipher,
    private readonly policy: WebhookTargetPolicy,
    private readonly options: DispatcherOptions,
    private readonly logger: DispatcherLogger,
  ) {
    this.timeoutMs = options.timeoutMs ?? 10_000;
    this.concurrency = options.concurrency ?? DEFAULT_DISPATCH_CONCURRENCY;
    this.perWebhook = options.perWebhook ?? 1;
    this.pollMs = options.pollMs ?? 1_000;
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  /** Looks for due deliveries now (new ones were just committed). */
  kick(): void {
    if (this.stopped) return;
    if (this.passing) {
      this.again = true;
      return;
    }
    this.schedule(0);
  }

  /** Takes no more deliveries and waits for the attempts in flight (each bounded by the timeout). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.passing;
    await Promise.allSettled([...this.running]);
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.pass(), delayMs);
    this.timer.unref();
  }

  private async pass(): Promise<void> {
    if (this.stopped || this.passing) return;
    this.again = false;
    this.passing = this.leaseAndSend()
      .catch((error: unknown) => this.logger.error('Looking for due webhook deliveries failed; trying again', { error: String(error) }))
      .finally(() => {
        this.passing = undefined;
        if (!this.stopped) this.schedule(this.again ? 0 : this.pollMs);
      });
    await this.passing;
  }

  private async leaseAndSend(): Promise<void> {
    const free = this.concurrency - this.running.size;
    if (free <= 0) return;
    // The lease covers the attempt with room to spare: past it, a crashed replica's delivery is due again.
    const leaseSeconds = Math.ceil((this.timeoutMs * 3) / 1000);
    // Webhooks at their share here are left out; the others' oldest due deliveries, their share at most each.
    const busy = [...this.inFlight].filter(([, count]) => count >= this.perWebhook).map(([webhookId]) => webhookId);
    const leased: Leased[] = await this.dataSource.query(`SELECT * FROM notify.lease_due_deliveries($1, $2, $3, $4::uuid[])`, [free, leaseSeconds, this.perWebhook, busy]);
    for (const delivery of leased) {
      if ((this.inFlight.get(delivery.webhook_id) ?? 0) >= this.perWebhook) {
        // This webhook has its share in flight: the delivery waits for its turn, delaying no other webhook's.
        await this.postpone(delivery);
        continue;
      }
      this.inFlight.set(delivery.webhook_id, (this.inFlight.get(delivery.webhook_id) ?? 0) + 1);
      const attempt = this.attempt(delivery)
        .catch((error: unknown) =>
          this.logger.error('A webhook delivery attempt failed to complete; it is due again once its lease ends', { delivery: delivery.id, error: String(error) }),
        )
        .finally(() => {
          const left = (this.inFlight.get(delivery.webhook_id) ?? 1) - 1;
          if (left === 0) this.inFlight.delete(delivery.webhook_id);
          else this.inFlight.set(delivery.webhook_id, left);
          this.running.delete(attempt);
          this.kick();
        });
      this.running.add(attempt);
    }
  }

  private postpone(delivery: Leased): Promise<void> {
    return runWithTenant({ tenantId: delivery.tenant_id }, () =>
      tenantTransaction(this.dataSource, async (manager) => {
        // The lease counted an attempt that is not made.
        await manager.query(
          `UPDATE notify.deliveries SET next_attempt_at = clock_timestamp() + interval '200 milliseconds', attempts = attempts - 1 WHERE tenant_id = $1 AND id = $2 AND state = 'pending'`,
          [delivery.tenant_id, delivery.id],
        );
      }),
    );
  }

  private async attempt(delivery: Leased): Promise<void> {
    await runWithTenant({ tenantId: delivery.tenant_id }, async () => {
      // The lease counted the attempt and brought what it needs, sealed: opened here (the data
      // keys table has no tenant rows to protect; a key not cached yet is read from it).
      let target: Attempt | 'unreadable';
      try {
        const manager = this.dataSource.manager;
        const secrets = await this.cipher.open<WebhookSecrets>(manager, { table: 'webhooks', id: delivery.webhook_id }, delivery.sealed);
        const body = await this.cipher.open<string>(manager, { table: 'deliveries', id: delivery.id }, delivery.payload);
        target = { url: new URL(secrets.url), secret: secrets.secret, eventId: delivery.event_id, body, attempt: delivery.attempts };
      } catch (error) {
        // Anything but a refusal to decrypt (the database not answering, say): the lease runs out and the delivery comes back.
        if (!(error instanceof DecryptionError)) throw error;
        // Its keys cannot open it (a KEK that is not configured): trying again would not help.
        this.logger.error('A webhook delivery could not be opened; it is marked failed', { delivery: delivery.id, error: String(error) });
        target = 'unreadable';
      }
      if (target === 'unreadable') {
        await this.settle(delivery, 'failed', null, 'the delivery could not be read', 0);
        return;
      }
      // Switched off since it was registered: a plain-HTTP target is not called.
      if (target.url.protocol !== 'https:' && !this.policy.allowPrivate) {
        await this.settle(delivery, 'failed', null, 'the target address is not allowed', 0);
        return;
      }
      const outcome = await sendSigned(target, this.policy, this.timeoutMs);
      const succeeded = outcome.status !== undefined && outcome.status >= 200 && outcome.status < 300;
      const schedule = this.options.retryScheduleSeconds;
      const retryInSeconds = succeeded ? undefined : schedule[target.attempt - 1];
      const state = succeeded ? 'succeeded' : retryInSeconds === undefined ? 'failed' : 'pending';
      const error = succeeded ? null : (outcome.error ?? `answered ${outcome.status}`);
      await this.settle(delivery, state, outcome.status ?? null, error, retryInSeconds ?? 0);
      if (state === 'failed') this.logger.warn('A webhook delivery failed for good after its last retry', { delivery: delivery.id, attempts: target.attempt, error });
    });
  }

  /** One round trip: the update goes with the transaction's commit. */
  private settle(delivery: Leased, state: 'pending' | 'succeeded' | 'failed', status: number | null, error: string | null, retryInSeconds: number): Promise<unknown> {
    // No string constant in the text (the state compared is a parameter): the update is inlined into the commit's message.
    return tenantTransaction(this.dataSource, (manager) =>
      deferWrite(
        manager,
        `UPDATE notify.deliveries SET state = $3, response_status = $4, error = $5, updated_at = clock_timestamp(),
           next_attempt_at = CASE WHEN $3 = $7 THEN clock_timestamp() + make_interval(secs => $6) END
         WHERE tenant_id = $1 AND id = $2 AND state = $7`,
        [delivery.tenant_id, delivery.id, state, status, error, retryInSeconds, 'pending'],
      ),
    );
  }
}
