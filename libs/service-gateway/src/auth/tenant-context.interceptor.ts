import { CallHandler, ExecutionContext, Injectable, NestInterceptor } from '@nestjs/common';
import type { FastifyRequest } from 'fastify';
import { Observable } from 'rxjs';
import { runWithTenant } from '@mission/tenant-context';

/** Runs tenant routes inside the caller's tenant context, so the bus stamps it on every message. */
@Injectable()
export class TenantContextInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const auth = context.switchToHttp().getRequest<FastifyRequest>().auth;
    const tenantId = auth?.tenantId;
    if (!auth || !tenantId) return next.handle();
    return new Observable((subscriber) =>
      runWithTenant({ tenantId, subject: auth.subject, scopes: [...auth.scopes] }, () => next.handle().subscribe(subscriber)),
    );
  }
}
