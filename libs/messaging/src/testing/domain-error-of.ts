import { DomainError } from '@mission/contracts';

/** The DomainError a promise rejects with; fails the test when it resolves or rejects with anything else. */
export async function domainErrorOf(promise: Promise<unknown>): Promise<DomainError> {
  const error = await promise.then(
    () => undefined,
    (caught: unknown) => caught,
  );
  if (!(error instanceof DomainError)) throw new Error(`expected a DomainError, got ${String(error)}`);
  return error;
}
