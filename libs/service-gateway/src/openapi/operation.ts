import { applyDecorators } from '@nestjs/common';
import { ApiExtension, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { Scope } from '@mission/contracts';
import { Operator, Public, TenantScopes } from '../auth/auth.decorators';
import type { QUERY_CONTRACTS, SchemaName } from './schemas';

export const OPERATION_EXTENSION = 'x-mission-operation';

export type ProblemStatus = 400 | 401 | 403 | 404 | 409 | 413 | 415 | 422 | 429 | 503;

/** Everything the OpenAPI document says about one route, beside the route itself. */
export interface OperationSpec {
  readonly operationId: string;
  readonly summary: string;
  readonly description?: string;
  readonly tag: 'Missions' | 'Brain' | 'HIT items' | 'MCP' | 'Operator' | 'Discovery and operations';
  /** Tenant routes name their scopes (and are rate-limited); operator routes need `platform:admin`. */
  readonly access: { readonly scopes: readonly Scope[] } | 'operator' | 'public';
  readonly body?: { readonly schema: SchemaName | 'json-rpc'; readonly required: boolean; readonly example?: unknown };
  readonly query?: keyof typeof QUERY_CONTRACTS;
  /** Description of the `:id` path parameter. */
  readonly pathId?: string;
  readonly idempotencyKey?: boolean;
  readonly success: {
    readonly status: number;
    readonly description: string;
    readonly schema?: SchemaName | 'text' | 'json-rpc' | 'health' | 'resource-metadata';
    readonly location?: boolean;
    readonly example?: unknown;
  };
  /** Failures beyond those every route of its kind can have (401/403/429/503 are added by access). */
  readonly problems?: readonly ProblemStatus[];
}

function access(spec: OperationSpec): MethodDecorator {
  if (spec.access === 'public') return Public();
  if (spec.access === 'operator') return Operator();
  return TenantScopes(...spec.access.scopes);
}

/**
 * Declares a route's access rule (what the AuthGuard enforces) and documents the route: its tag,
 * summary and the spec the document builder expands. One declaration, so the document cannot
 * claim other scopes than the guard checks.
 */
export function Operation(spec: OperationSpec): MethodDecorator {
  return applyDecorators(
    access(spec),
    ApiTags(spec.tag),
    ApiOperation({ operationId: spec.operationId, summary: spec.summary, ...(spec.description ? { description: spec.description } : {}) }),
    ApiExtension(OPERATION_EXTENSION, spec as unknown as Record<string, unknown>),
  );
}
