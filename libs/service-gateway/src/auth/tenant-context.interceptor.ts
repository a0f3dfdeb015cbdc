import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Observable } from 'rxjs';
import { activeSpanTraceparent, childTraceparent, describeActiveSpan, runWithRequestId, runWithTenant, runWithTrace, TRACEPARENT_HEADER } from '@mission/tenant-context';

/**
 * Runs every route inside a W3C trace (continuing the caller's `traceparent`, or starting one)
 * and tenant routes inside the caller's tenant context, so the bus stamps both on every message.
 * With OpenTelemetry on, the trace is the HTTP server span's (named here after the route template).
 */
@Injectable()
export class TenantContextInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const http = context.switchToHttp();
    const request = http.getRequest<FastifyRequest>();
    const route = request.routeOptions.url;
    if (route) describeActiveSpan(`${request.method} ${route}`, { 'http.route': route });
    const traceparent = activeSpanTraceparent() ?? childTraceparent(request.headers[TRACEPARENT_HEADER] as string | undefined);
    void http.getResponse<FastifyReply>().header(TRACEPARENT_HEADER, traceparent);
    const auth = request.auth;
    const tenantId = auth?.tenantId;
    return new Observable((subscriber) =>
      runWithRequestId(String(request.id), () =>
        runWithTrace(traceparent, () => {
          if (!auth || !tenantId) return next.handle().subscribe(subscriber);
          return runWithTenant({ tenantId, subject: auth.subject, scopes: [...auth.scopes] }, () => next.handle().subscribe(subscriber));
        }),
      ),
    );
  }
}
