import { applyDecorators } from '@nestjs/common';
import { ApiExtension, ApiOperation, ApiTags } from '@nestjs/swagger';
import type { HttpBinding, OperationAccess } from '@mission/contracts';
import { Access } from '../auth/access';

export const OPERATION_EXTENSION = 'x-mission-operation';

/** Everything the OpenAPI document says about one route, beside the route itself. */
export type OperationSpec = Omit<HttpBinding, 'method' | 'path'> & { readonly access: OperationAccess };

/**
 * Declares a route's access (what the arrival hook enforces) and documents the route: its tag,
 * summary and the spec the document builder expands. One declaration, so the document cannot
 * claim other scopes than are checked.
 */
export function Operation(spec: OperationSpec): MethodDecorator {
  return applyDecorators(
    Access(spec.access, spec.bodyLimit === undefined ? {} : { bodyLimit: spec.bodyLimit }),
    ApiTags(spec.tag),
    ApiOperation({ operationId: spec.operationId, summary: spec.summary, ...(spec.description ? { description: spec.description } : {}) }),
    ApiExtension(OPERATION_EXTENSION, spec as unknown as Record<string, unknown>),
  );
}
