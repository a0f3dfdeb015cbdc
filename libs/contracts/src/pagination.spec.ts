import fc from 'fast-check';
import { DomainError, ErrorCode } from './errors';
import { decodeCursor, decodeSequenceCursor, encodeCursor, encodeSequenceCursor } from './pagination';

const cursorOf = (value: unknown): string => Buffer.from(JSON.stringify(value), 'utf8').toString('base64url');

/** What PostgreSQL's timestamptz stores: years 1 (4713 BC, in fact) to 294276, an offset within ±15:59. */
function storable(at: string): boolean {
  const parsed = Date.parse(at);
  return Number.isFinite(parsed) && new Date(parsed).getUTCFullYear() >= 1;
}

describe('list cursors', () => {
  it('round-trips every position the API issues', () => {
    fc.assert(
      fc.property(fc.date({ min: new Date('0001-01-01T00:00:00.000Z'), max: new Date('9999-12-31T23:59:59.999Z'), noInvalidDate: true }), fc.uuid(), (date, id) => {
        const position = { at: date.toISOString(), id };
        expect(decodeCursor(encodeCursor(position))).toEqual(position);
      }),
    );
  });

  it('refuses, as a 400 validation problem, timestamps the database would refuse', () => {
    const id = '00000000-0000-4000-8000-000000000000';
    for (const at of [
      '0000-01-01T00:00:00Z',
      '0000-12-31T23:59:59.999Z',
      '2026-01-01T00:00:00-23:59',
      '2026-01-01T00:00:00+14:00',
      '2026-13-01T00:00:00Z',
      '2026-02-30T00:00:00Z',
      '+275760-09-13T00:00:00.000Z',
    ]) {
      let error: unknown;
      try {
        decodeCursor(cursorOf({ v: 1, at, id }));
      } catch (caught) {
        error = caught;
      }
      expect({ at, error }).toEqual({ at, error: expect.objectContaining({ code: ErrorCode.ValidationFailed }) });
    }
  });

  it('answers any string either with a position the database can store or with a validation problem, never anything else', () => {
    const anything = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc
        .record({
          v: fc.constantFrom(1, 2, '1'),
          at: fc.oneof(
            fc.string(),
            fc.date({ noInvalidDate: false }).map((date) => (Number.isNaN(date.getTime()) ? 'x' : date.toISOString())),
          ),
          id: fc.oneof(fc.uuid(), fc.string()),
        })
        .map(cursorOf),
    );
    fc.assert(
      fc.property(anything, (cursor) => {
        try {
          const position = decodeCursor(cursor);
          expect(storable(position.at)).toBe(true);
        } catch (error) {
          expect(error).toBeInstanceOf(DomainError);
          expect((error as DomainError).code).toBe(ErrorCode.ValidationFailed);
        }
      }),
      { numRuns: 2_000 },
    );
  });
});

describe('sequence cursors', () => {
  it('round-trips every position of a sequence', () => {
    fc.assert(fc.property(fc.integer({ min: 0, max: 2_147_483_647 }), (after) => expect(decodeSequenceCursor(encodeSequenceCursor(after))).toBe(after)));
  });

  it('refuses anything else as a 400 validation problem, a timestamp cursor of the other lists included', () => {
    const anything = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc
        .record({
          v: fc.constantFrom(1, 2, '1'),
          after: fc.oneof(
            fc.integer({ max: -1 }),
            fc.double().filter((n) => !Number.isInteger(n)),
            fc.string(),
            fc.constantFrom(2_147_483_648, Number.MAX_SAFE_INTEGER),
          ),
        })
        .map(cursorOf),
      fc.constant(encodeCursor({ at: '2026-11-26T10:00:00.000Z', id: '00000000-0000-4000-8000-000000000000' })),
    );
    fc.assert(
      fc.property(anything, (cursor) => {
        let error: unknown;
        try {
          decodeSequenceCursor(cursor);
        } catch (caught) {
          error = caught;
        }
        expect(error).toBeInstanceOf(DomainError);
        expect(error).toMatchObject({ code: ErrorCode.ValidationFailed });
      }),
    );
  });
});
