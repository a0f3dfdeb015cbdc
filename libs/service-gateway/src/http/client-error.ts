import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { ErrorCode } from '@mission/contracts';
import { PROBLEM_CONTENT_TYPE, problemFor } from './problem';

/** Node's limit of a request line and its headers together (its `maxHeaderSize` default), which the gateway keeps. */
export const MAX_HEADER_BYTES = 16 * 1024;
/** Time a client has to send a whole request, headers and body (slow senders are cut off). */
export const REQUEST_TIMEOUT_MS = 60_000;
/** Time a client has to send the request line and headers. */
export const HEADERS_TIMEOUT_MS = 20_000;

function detailOf(code: ErrorCode, requestTimeoutMs: number): string {
  if (code === ErrorCode.HeadersTooLarge)
    return `The request line and headers together are larger than ${MAX_HEADER_BYTES} bytes; send a long Brain query as POST /api/brain/query`;
  if (code === ErrorCode.RequestTimeout) return `The request did not arrive in full within ${requestTimeoutMs / 1000} s`;
  return 'The request is not HTTP the server can read';
}

/**
 * The answer to a request Node's HTTP parser refused before any route saw it (headers past the
 * limit, a request that took too long, bytes that are not HTTP): problem details with a request
 * id like every other error, and `Connection: close`, since the connection cannot carry another
 * request after a message the server could not read to its end. Written to the socket directly:
 * there is no request object yet.
 */
export function clientErrorResponse(
  error: { code?: string },
  typeBase: string,
  requestTimeoutMs = REQUEST_TIMEOUT_MS,
  extraHeaders: Readonly<Record<string, string>> = {},
): string {
  const code = error.code === 'HPE_HEADER_OVERFLOW' ? ErrorCode.HeadersTooLarge : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? ErrorCode.RequestTimeout : ErrorCode.MalformedRequest;
  const requestId = randomUUID();
  const problem = problemFor(code, detailOf(code, requestTimeoutMs), { instance: '/', requestId, typeBase });
  const body = JSON.stringify(problem);
  const headers = {
    'Content-Type': PROBLEM_CONTENT_TYPE,
    'Content-Length': String(Buffer.byteLength(body)),
    'Cache-Control': 'no-store',
    'X-Request-Id': requestId,
    Connection: 'close',
    ...extraHeaders,
  };
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}`);
  return `HTTP/1.1 ${problem.status} ${problem.title}\r\n${lines.join('\r\n')}\r\n\r\n${body}`;
}

/** Fastify's `clientErrorHandler`: answers what can still be answered, then closes the connection. */
export function clientErrorHandler(
  typeBase: string,
  requestTimeoutMs: number,
  extraHeaders: Readonly<Record<string, string>> = {},
): (error: Error & { code?: string }, socket: Socket) => void {
  return (error, socket) => {
    // A reset connection has nobody to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    if (socket.writable) socket.end(clientErrorResponse(error, typeBase, requestTimeoutMs, extraHeaders));
    else socket.destroy();
  };
}
