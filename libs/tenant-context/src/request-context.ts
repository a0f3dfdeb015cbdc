import { currentScope, runInScope } from './scope';

/** Runs `fn` as the handling of the HTTP request `requestId` (the X-Request-Id it is answered with): log lines written in it carry the id. */
export function runWithRequestId<T>(requestId: string, fn: () => T): T {
  return runInScope({ requestId }, fn);
}

export function currentRequestId(): string | undefined {
  return currentScope()?.requestId;
}
