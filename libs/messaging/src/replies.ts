import { DomainError, ErrorCode } from '@mission/contracts';
import { TENANT_HEADER } from '@mission/tenant-context';
import { Headers } from './bus';
import { BusLogger, describe, requestTimedOut } from './delivery';

interface Pending {
  /** The tenant the request was sent for: only a reply of the same tenant is read. */
  readonly tenantId: string | undefined;
  readonly resolve: (reply: unknown) => void;
  readonly reject: (error: unknown) => void;
}

/**
 * The requests of one bus still waiting for their replies, by correlation id. Both adapters use
 * it, so a reply is matched, checked and timed out the same way on either.
 */
export class PendingReplies {
  private readonly pending = new Map<string, Pending>();

  constructor(private readonly logger: BusLogger) {}

  get size(): number {
    return this.pending.size;
  }

  /**
   * Registers request `id` (sent for `tenantId`), then calls `send`; resolves with the reply,
   * rejects with `dependency_unavailable` after `timeoutMs`, or with what `send` rejects with.
   */
  wait(id: string, tenantId: string | undefined, timeoutMs: number, what: { topic: string; type: string }, send: () => Promise<unknown>): Promise<unknown> {
    return new Promise<unknown>((resolve, reject) => {
      const settle = (): boolean => {
        clearTimeout(timer);
        return this.pending.delete(id);
      };
      const timer = setTimeout(() => {
        if (settle()) reject(requestTimedOut(what.topic, what.type, timeoutMs));
      }, timeoutMs);
      this.pending.set(id, {
        tenantId: tenantId?.toLowerCase(),
        resolve: (value) => settle() && resolve(value),
        reject: (error) => settle() && reject(error),
      });
      send().catch((error: unknown) => this.pending.get(id)?.reject(error));
    });
  }

  /**
   * Hands a reply to its waiting request: the body `open` reads, or undefined (which the caller
   * turns into `internal_error`) when the reply names another tenant than its request or cannot
   * be read. A reply nobody waits for any more is dropped without being opened.
   */
  async deliver(headers: Readonly<Record<string, string>>, open: () => Promise<unknown>): Promise<void> {
    const correlationId = headers[Headers.correlationId] ?? '';
    const pending = this.pending.get(correlationId);
    if (!pending) return;
    let reply: unknown;
    try {
      if (headers[TENANT_HEADER]?.toLowerCase() !== pending.tenantId) throw new Error('The reply names another tenant than its request');
      reply = await open();
    } catch (error) {
      this.logger.error('Unreadable reply', { correlationId, error: describe(error) });
      reply = undefined;
    }
    pending.resolve(reply);
  }

  /** Fails every waiting request: the bus is closing. */
  rejectAll(): void {
    for (const pending of [...this.pending.values()]) {
      pending.reject(new DomainError(ErrorCode.DependencyUnavailable, 'The message bus closed before the answer arrived'));
    }
  }
}
