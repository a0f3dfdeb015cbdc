import type { FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { activeSpanTraceparent, childTraceparent, describeActiveSpan, runWithTrace, tenantScope, TRACEPARENT_HEADER } from '@mission/tenant-context';

/**
 * A `preHandler` hook: runs the route (guards, pipes, controller) inside a W3C trace (continuing
 * the caller's `traceparent`, or starting one) and a tenant's request inside its tenant context,
 * so the bus stamps both on every message. With OpenTelemetry on, the trace is the HTTP server
 * span's (named here after the route template).
 *
 * Tenant paths are authenticated on arrival (gateway.ts), so the caller is known here. Fastify
 * calls the route's handler from `done`, synchronously, so the handler runs inside the contexts
 * entered around it. A hook rather than a Nest interceptor: an interceptor wraps every request in
 * rxjs and async-resource bindings that cost more than the rest of Nest's own work per request.
 */
export function enterRequestContext(request: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction): void {
  const route = request.routeOptions.url;
  if (route) describeActiveSpan(`${request.method} ${route}`, { 'http.route': route });
  const traceparent = activeSpanTraceparent() ?? childTraceparent(request.headers[TRACEPARENT_HEADER] as string | undefined);
  void reply.header(TRACEPARENT_HEADER, traceparent);
  const auth = request.auth;
  const tenantId = auth?.tenantId;
  // One scope for the request id, the trace and the tenant: each scope entered costs a copy of the context.
  const requestId = String(request.id);
  const alongside = auth && tenantId ? { requestId, ...tenantScope({ tenantId, subject: auth.subject, scopes: [...auth.scopes] }) } : { requestId };
  runWithTrace(traceparent, () => done(), undefined, alongside);
}
