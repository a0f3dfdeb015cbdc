import { Controller, Get, Inject, OnModuleDestroy, Req, Res } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import {
  cursorExpired,
  DomainError,
  ErrorCode,
  EventStreamQuerySchema,
  Messages,
  parseOrThrow,
  readableEventTypes,
  Scopes,
  TENANT_EVENT_SCOPES,
  type TenantEvent,
  type TenantEventType,
} from '@mission/contracts';
import { type MessageBus, requestMessage } from '@mission/messaging';
import { runWithTenant } from '@mission/tenant-context';
import { Caller } from '../auth/access';
import { insufficientScopeProblem } from '../auth/authenticate';
import type { Authenticated } from '../auth/authenticated';
import { BUS, GATEWAY_OPTIONS, GatewayOptions } from '../gateway.options';
import { HttpProblemError } from '../http/http-problem.error';
import { Operation } from '../openapi/operation';
import { EventStreamCursor, type LogReader } from './event-stream';
import { TenantEventFeed } from './tenant-event-feed';

/** How often a stream sends a comment line (so proxies keep it open) and checks the log for anything the feed missed. */
export const HEARTBEAT_MS = 15_000;
/** Streams one tenant may hold open on one gateway instance. */
export const MAX_STREAMS_PER_TENANT = 100;
/** What a stream may have waiting for a slow client before it is ended (the client resumes with Last-Event-ID). */
const MAX_BUFFERED_BYTES = 1024 * 1024;
/** A catch-up reads its next page once no more than this is waiting for the client. */
const PACE_BYTES = 256 * 1024;

/** Streams open on this instance, by tenant (the feed's other listeners, such as waits, do not count). */
class OpenStreams {
  private readonly byTenant = new Map<string, number>();

  count(tenantId: string): number {
    return this.byTenant.get(tenantId) ?? 0;
  }

  take(tenantId: string): void {
    this.byTenant.set(tenantId, this.count(tenantId) + 1);
  }

  release(tenantId: string): void {
    const left = this.count(tenantId) - 1;
    if (left > 0) this.byTenant.set(tenantId, left);
    else this.byTenant.delete(tenantId);
  }
}
/** Longest `Last-Event-ID` looked at: an event id is far shorter. */
const MAX_LAST_EVENT_ID = 64;
/** Connection-specific headers are HTTP/1.1's own; HTTP/2 refuses them (RFC 9113 §8.2.2). */
const CONNECTION_HEADERS = ['connection', 'keep-alive', 'transfer-encoding'];

/** What stops a catch-up whose stream ended meanwhile. */
class StreamEnded extends Error {}

/** One event as a server-sent event: its id (what a client resumes from), its type, its JSON. */
export function serverSentEvent(event: TenantEvent): string {
  return `id: ${event.id}\nevent: ${event.type}\ndata: ${JSON.stringify(event)}\n\n`;
}

/**
 * `GET /api/events`: the tenant's events as server-sent events. The caller was authenticated and
 * charged once on arrival. The stream sends the event types the token may read (those asked for
 * in `types`: one it may not read is 403), of one mission with `missionId`; with `Last-Event-ID`
 * it starts with every event after that one, then live ones, with no gap and no repeat (an id
 * unknown to the log, or older than it keeps, is 400 `cursor_expired` before anything is sent).
 */
@Controller('api/events')
export class EventsController implements OnModuleDestroy {
  private readonly streams = new OpenStreams();

  constructor(
    @Inject(GATEWAY_OPTIONS) private readonly options: GatewayOptions,
    @Inject(BUS) private readonly bus: MessageBus,
    private readonly feed: TenantEventFeed,
  ) {}

  @Get()
  @Operation({
    operationId: 'streamEvents',
    tag: 'Events',
    summary: "Stream the tenant's events (server-sent events), resumable with Last-Event-ID",
    description:
      'Sends `mission.*` events to a token with `missions:read` and `hit.*` events to one with `hits:read` (asking in `types` for one the token may not read is 403). ' +
      'Each event is `id: <event id>`, `event: <type>`, `data: <the event JSON>`; a comment line comes at least every 15 s. ' +
      'Reconnect with `Last-Event-ID` to get every event after that one, then live ones. Opening a stream takes one token of the rate limit; ' +
      `a tenant may hold ${MAX_STREAMS_PER_TENANT} streams open on one gateway instance (429 beyond).`,
    access: { scopes: [] },
    query: 'events',
    lastEventId: true,
    success: { status: 200, description: 'The stream: open until the client or the gateway ends it', schema: 'event-stream' },
  })
  async stream(@Req() request: FastifyRequest, @Res() reply: FastifyReply, @Caller() caller: Authenticated): Promise<void> {
    const tenantId = caller.tenantId;
    if (!tenantId) throw insufficientScopeProblem(this.options.publicUrl, []);
    const query = parseOrThrow(EventStreamQuerySchema, request.query, 'Query');
    const types = this.typesFor(caller, query.types);
    const lastEventId = lastEventIdOf(request);
    if (this.streams.count(tenantId) >= MAX_STREAMS_PER_TENANT) {
      throw new HttpProblemError(ErrorCode.RateLimited, `The tenant holds ${MAX_STREAMS_PER_TENANT} event streams open on this gateway already; close one first`, {
        'Retry-After': '5',
      });
    }

    const read: LogReader = (after, limit) =>
      runWithTenant({ tenantId }, () =>
        requestMessage(this.bus, Messages.eventsList, { types, limit, ...(after === undefined ? {} : { after }), ...(query.missionId ? { missionId: query.missionId } : {}) }),
      );
    const raw = reply.raw;
    let open = true;
    let pending: string[] | undefined = [];
    const timers: { heartbeat?: NodeJS.Timeout } = {};
    let stopListening = (): void => undefined;
    const end = (): void => {
      if (!open) return;
      open = false;
      clearInterval(timers.heartbeat);
      stopListening();
      this.streams.release(tenantId);
      if (pending === undefined && !raw.writableEnded) raw.end();
    };
    const write = (chunk: string): void => {
      if (!open) return;
      if (pending) {
        pending.push(chunk);
        return;
      }
      raw.write(chunk);
      // A client that does not read: ended rather than buffered without bound; it resumes where it got to.
      if (raw.writableLength > MAX_BUFFERED_BYTES) end();
    };
    /** Before a catch-up reads its next page: what was sent is on its way to the client, who is still there. */
    const pace = async (): Promise<void> => {
      if (open && raw.writableLength > PACE_BYTES) {
        await new Promise<void>((resolve) => {
          const done = (): void => {
            raw.off('drain', done).off('close', done);
            resolve();
          };
          raw.on('drain', done).on('close', done);
        });
      }
      // A stream that ended reads no more of the log.
      if (!open) throw new StreamEnded();
    };
    const cursor = new EventStreamCursor(
      read,
      { types: new Set(types), missionId: query.missionId },
      (event) => write(serverSentEvent(event)),
      (error) => {
        if (!(error instanceof StreamEnded)) {
          this.options.logger.warn({ err: error, tenantId }, 'An event stream could not read the event log; ending it (the client resumes with Last-Event-ID)');
        }
        end();
      },
      pace,
    );
    this.streams.take(tenantId);
    // A client that leaves while the log is read ends it too (nothing is sent, nothing is held).
    raw.once('close', end);
    // Listening before the log is read: what happens meanwhile waits in the cursor's queue.
    try {
      stopListening = this.feed.listen(tenantId, { onEvent: (event) => void cursor.offer(event), onClose: end });
      await cursor.start(lastEventId);
    } catch (error) {
      end();
      throw error;
    }
    // The gateway began to stop, or the client left, while the log was read.
    if (!open) throw new DomainError(ErrorCode.DependencyUnavailable, 'The gateway is stopping; reconnect with Last-Event-ID');

    reply.hijack();
    const headers: Record<string, string | number | string[]> = {};
    for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined && !CONNECTION_HEADERS.includes(name)) headers[name] = value;
    raw.writeHead(200, { ...headers, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', 'x-accel-buffering': 'no' });
    raw.write(': stream open\n\n');
    const firstPage = pending;
    pending = undefined;
    for (const chunk of firstPage) write(chunk);
    if (!open) return;
    timers.heartbeat = setInterval(() => {
      write(': keep-alive\n\n');
      void cursor.reconcile();
    }, HEARTBEAT_MS);
    timers.heartbeat.unref();
    // The rest of a long catch-up, a page at a time as the client takes them.
    void cursor.resume();
  }

  /** Every stream ends when the gateway stops: its clients resume elsewhere with Last-Event-ID. */
  onModuleDestroy(): void {
    this.feed.close();
  }

  /** The types asked for (all the token may read when none are), each one the token may read. */
  private typesFor(caller: Authenticated, asked: readonly TenantEventType[] | undefined): TenantEventType[] {
    const readable = readableEventTypes([...caller.scopes]);
    if (asked === undefined) {
      if (readable.length === 0) throw insufficientScopeProblem(this.options.publicUrl, [Scopes.missionsRead]);
      return readable;
    }
    const missing = [...new Set(asked.filter((type) => !readable.includes(type)).map((type) => TENANT_EVENT_SCOPES[type]))];
    if (missing.length > 0) throw insufficientScopeProblem(this.options.publicUrl, missing);
    return [...asked];
  }
}

function lastEventIdOf(request: FastifyRequest): string | undefined {
  const header = request.headers['last-event-id'];
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || value === '') return undefined;
  if (value.length > MAX_LAST_EVENT_ID) throw cursorExpired(value);
  return value;
}
