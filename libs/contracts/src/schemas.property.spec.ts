import fc from 'fast-check';
import { z } from 'zod';
import { BrainQuerySchema, IngestDocumentSchema } from './brain';
import { DomainError, ErrorCode } from './errors';
import { DecideHitBodySchema } from './hits';
import { ListMissionsQuerySchema, SubmitMissionSchema } from './missions';
import { CreateClientSchema, CreateTenantSchema, CreateUserSchema, UpdateTenantSchema } from './tenants';
import { parseOrThrow } from './validation';

/** Every request schema a client's body or query reaches. */
const SCHEMAS: ReadonlyArray<readonly [string, z.ZodType]> = [
  ['SubmitMission', SubmitMissionSchema],
  ['ListMissionsQuery', ListMissionsQuerySchema],
  ['BrainQuery', BrainQuerySchema],
  ['IngestDocument', IngestDocumentSchema],
  ['DecideHitBody', DecideHitBodySchema],
  ['CreateTenant', CreateTenantSchema],
  ['UpdateTenant', UpdateTenantSchema],
  ['CreateClient', CreateClientSchema],
  ['CreateUser', CreateUserSchema],
];

/** Bodies a hostile client may send: any JSON, and objects that look almost right. */
const hostile = fc.oneof(
  fc.jsonValue({ maxDepth: 6 }),
  fc.dictionary(
    fc.constantFrom(
      'title',
      'objective',
      'steps',
      'type',
      'q',
      'k',
      'limit',
      'cursor',
      'status',
      'name',
      'tier',
      'rpm',
      'scopes',
      'comment',
      'content',
      'metadata',
      '__proto__',
      'constructor',
    ),
    fc.jsonValue({ maxDepth: 3 }),
  ),
);

describe('request schemas against arbitrary input', () => {
  it.each(SCHEMAS)('%s answers any JSON with a value or a validation problem, never an exception of another kind', (_name, schema) => {
    fc.assert(
      fc.property(hostile, (input) => {
        try {
          const value = parseOrThrow(schema, input);
          // What is accepted is plain data: it survives JSON and is accepted again as it is.
          expect(parseOrThrow(schema, JSON.parse(JSON.stringify(value)))).toEqual(value);
        } catch (error) {
          expect(error).toBeInstanceOf(DomainError);
          expect((error as DomainError).code).toBe(ErrorCode.ValidationFailed);
        }
      }),
      { numRuns: 400 },
    );
  });
});
