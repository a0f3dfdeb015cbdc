import { ConsumerGroups, DomainError, ErrorCode, MessageTypes, NotifyEventSchemas, Topics, type TenantEvent } from '@mission/contracts';
import { eventHandlers, type MessageBus } from '@mission/messaging';
import { currentTenant } from '@mission/tenant-context';

/** Someone holding an event stream open: told of each of its tenant's events, and when the feed closes. */
export interface FeedListener {
  onEvent(event: TenantEvent): void;
  onClose(): void;
}

/**
 * Every event the tenants' logs record (notify.events.v1), read by this gateway instance in a
 * broadcast group of its own and handed to the streams open here for the event's tenant. It is
 * created with the bus, before the bus starts. Live delivery may miss an event (the group joins
 * a moment after the instance starts) or repeat one (redelivery): the streams number what they
 * saw and read the log itself to fill any gap.
 */
export class TenantEventFeed {
  private readonly listeners = new Map<string, Set<FeedListener>>();
  private closed = false;

  constructor(bus: MessageBus) {
    bus.subscribe(
      Topics.notifyEvents,
      ConsumerGroups.gatewayEvents,
      eventHandlers(NotifyEventSchemas, {
        [MessageTypes.tenantEventRecorded]: async (event) => this.deliver(currentTenant().tenantId, event),
      }),
      { broadcast: true },
    );
  }

  /** Adds a listener for the tenant's events; returns what removes it. */
  listen(tenantId: string, listener: FeedListener): () => void {
    // The gateway is stopping: a new stream or wait is 503, and its client tries again (elsewhere).
    if (this.closed) throw new DomainError(ErrorCode.DependencyUnavailable, 'The gateway is stopping; try again');
    const listeners = this.listeners.get(tenantId) ?? new Set<FeedListener>();
    this.listeners.set(tenantId, listeners);
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
      if (listeners.size === 0 && this.listeners.get(tenantId) === listeners) this.listeners.delete(tenantId);
    };
  }

  /** Ends every stream (the gateway is stopping: clients reconnect elsewhere with Last-Event-ID). */
  close(): void {
    this.closed = true;
    const all = [...this.listeners.values()].flatMap((listeners) => [...listeners]);
    this.listeners.clear();
    for (const listener of all) listener.onClose();
  }

  private deliver(tenantId: string, event: TenantEvent): void {
    for (const listener of [...(this.listeners.get(tenantId) ?? [])]) listener.onEvent(event);
  }
}
