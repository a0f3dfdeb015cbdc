/** A thin HTTP client for driving the public API in tests, the way a client would. */
import { type IncomingMessage, request as httpRequest } from 'node:http';
import net from 'node:net';

export interface ApiResponse<T = any> {
  readonly status: number;
  readonly headers: Headers;
  readonly body: T;
}

export async function call<T = any>(
  baseUrl: string,
  method: string,
  path: string,
  options: { token?: string; body?: unknown; rawBody?: string; contentType?: string; headers?: Record<string, string> } = {},
): Promise<ApiResponse<T>> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token) headers.authorization = `Bearer ${options.token}`;
  let body: string | undefined;
  if (options.rawBody !== undefined) {
    body = options.rawBody;
    headers['content-type'] = options.contentType ?? 'application/json';
  } else if (options.body !== undefined) {
    body = JSON.stringify(options.body);
    headers['content-type'] = options.contentType ?? 'application/json';
  }
  const response = await fetch(`${baseUrl}${path}`, { method, headers, body });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = text ? JSON.parse(text) : undefined;
  } catch {
    // not JSON; keep the text
  }
  return { status: response.status, headers: response.headers, body: parsed as T };
}

/** A node:http response read whole: its status, headers, and body parsed as JSON (the text when it is not JSON). */
function apiResponseOf(response: IncomingMessage): Promise<ApiResponse> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    response.on('data', (part: Buffer) => parts.push(part));
    response.once('error', reject);
    response.once('end', () => {
      const text = Buffer.concat(parts).toString('utf8');
      const headers = new Headers();
      for (const [name, value] of Object.entries(response.headers)) if (typeof value === 'string') headers.set(name, value);
      let body: unknown = text;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        // not JSON; keep the text
      }
      resolve({ status: response.statusCode ?? 0, headers, body });
    });
  });
}

/**
 * A POST whose Content-Length announces `declaredBytes` but that sends only its first bytes: the
 * gateway must refuse it from the header alone. This is how oversized bodies are tested: sending the
 * whole body races the server closing the connection right after its 413, which a client still
 * writing sees as a broken pipe (EPIPE) instead of the response.
 */
export function postDeclaringLength(baseUrl: string, path: string, token: string | undefined, declaredBytes: number): Promise<ApiResponse> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(`${baseUrl}${path}`, {
      method: 'POST',
      headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), 'content-type': 'application/json', 'content-length': String(declaredBytes) },
    });
    request.on('response', (response) => {
      apiResponseOf(response).then((answer) => {
        request.destroy();
        resolve(answer);
      }, reject);
    });
    request.on('error', reject);
    request.write('{"title":"T","content":"');
  });
}

/** A POST of `bytes` exactly as given, as JSON: declared by Content-Length, or, with `splitAt`, sent chunked in two writes cut at that byte. */
export function postBytes(baseUrl: string, path: string, token: string | undefined, bytes: Buffer, splitAt?: number): Promise<ApiResponse> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(`${baseUrl}${path}`, {
      method: 'POST',
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        'content-type': 'application/json',
        ...(splitAt === undefined ? { 'content-length': String(bytes.length) } : {}),
      },
    });
    request.on('response', (response) => void apiResponseOf(response).then(resolve, reject));
    request.on('error', reject);
    if (splitAt === undefined) request.end(bytes);
    else {
      request.write(bytes.subarray(0, splitAt));
      request.end(bytes.subarray(splitAt));
    }
  });
}

/** The claims of a JWT, unverified (what a test inspects of a token it was just given). */
export function jwtClaims(jwt: string): Record<string, any> {
  return JSON.parse(Buffer.from(jwt.split('.')[1] ?? '', 'base64url').toString('utf8'));
}

export interface TokenResponse {
  readonly access_token: string;
  readonly token_type: string;
  readonly expires_in: number;
  readonly scope?: string;
}

/** client_credentials at the issuer's token endpoint (found through discovery), client_secret_basic. */
export async function clientCredentialsToken(issuer: string, clientId: string, clientSecret: string, scope?: string): Promise<TokenResponse> {
  const discovery = (await (await fetch(`${issuer}/.well-known/openid-configuration`)).json()) as { token_endpoint: string };
  const form = new URLSearchParams({ grant_type: 'client_credentials' });
  if (scope) form.set('scope', scope);
  const response = await fetch(discovery.token_endpoint, {
    method: 'POST',
    headers: {
      authorization: `Basic ${Buffer.from(`${encodeURIComponent(clientId)}:${encodeURIComponent(clientSecret)}`).toString('base64')}`,
      'content-type': 'application/x-www-form-urlencoded',
    },
    body: form,
  });
  const body = (await response.json()) as TokenResponse & { error?: string };
  if (response.status !== 200) throw new Error(`Token request failed: ${response.status} ${JSON.stringify(body)}`);
  return body;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * How long a response asks the client to wait before asking again (its Retry-After, in ms): a 429
 * (refused before any work, so any request may be repeated) and, for a GET, a 503. Otherwise undefined.
 */
export function retryAfterMs(method: string, response: { status: number; headers: Headers }): number | undefined {
  if (response.status !== 429 && !(response.status === 503 && method.toUpperCase() === 'GET')) return undefined;
  const header = response.headers.get('retry-after')?.trim() ?? '';
  if (/^\d+$/.test(header)) return Number(header) * 1000;
  const date = Date.parse(header);
  return Number.isNaN(date) ? 1_000 : Math.max(0, date - Date.now());
}

/**
 * `call` the way a polling client must make it: a 429 (or a GET's 503) is asked again after its
 * Retry-After, not sooner, for up to `patienceMs`; after that the refusal is returned as it came.
 */
export async function politeCall<T = any>(baseUrl: string, method: string, path: string, options: Parameters<typeof call>[3] = {}, patienceMs = 30_000): Promise<ApiResponse<T>> {
  const giveUpAt = Date.now() + patienceMs;
  for (;;) {
    const response = await call<T>(baseUrl, method, path, options);
    const wait = retryAfterMs(method, response);
    if (wait === undefined || Date.now() + wait > giveUpAt) return response;
    await sleep(wait);
  }
}

/** `fetch` with politeCall's manners, for clients that take a fetch (the generated API client, MCP transports). */
export function politeFetch(patienceMs = 30_000): typeof fetch {
  return async (input, init) => {
    const giveUpAt = Date.now() + patienceMs;
    for (;;) {
      // A Request's body can be read once: each attempt sends a fresh copy.
      const response = await fetch(input instanceof Request ? input.clone() : input, init);
      const method = init?.method ?? (input instanceof Request ? input.method : 'GET');
      const wait = retryAfterMs(method, response);
      if (wait === undefined || Date.now() + wait > giveUpAt) return response;
      await response.body?.cancel();
      await sleep(wait);
    }
  };
}

/** Polls a mission until it reaches a final status (politely: see politeCall). */
export async function waitForMission(baseUrl: string, token: string, id: string, timeoutMs = 30_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const response = await politeCall(baseUrl, 'GET', `/api/missions/${id}`, { token }, Math.max(0, deadline - Date.now()));
    if (response.status !== 200) throw new Error(`GET mission answered ${response.status}: ${JSON.stringify(response.body)}`);
    if (['succeeded', 'failed', 'rejected', 'cancelled'].includes(response.body.status)) return response.body;
    if (Date.now() > deadline) throw new Error(`Mission still ${response.body.status} after ${timeoutMs} ms`);
    await sleep(100);
  }
}

/** Polls `probe` until it returns a value, or fails naming `what`. A probe that calls the API uses politeCall. */
export async function eventually<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await sleep(100);
  }
}

/** What a server answered on a raw connection, and whether it closed the connection after. */
export interface RawExchange {
  readonly statusLine: string;
  readonly headers: Record<string, string>;
  readonly body: string;
  readonly closedByServer: boolean;
}

/**
 * Writes bytes to a fresh connection as they are (requests no HTTP client would send) and reads
 * the one response, until the server closes the connection or `timeoutMs` passes.
 */
export function rawExchange(baseUrl: string, request: string, timeoutMs = 20_000): Promise<RawExchange> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    const chunks: Buffer[] = [];
    let closedByServer = false;
    const timer = setTimeout(() => socket.destroy(), timeoutMs);
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('end', () => (closedByServer = true));
    socket.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      const text = Buffer.concat(chunks).toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const [statusLine = '', ...lines] = (split < 0 ? text : text.slice(0, split)).split('\r\n');
      const headers = Object.fromEntries(
        lines.map((line) => {
          const colon = line.indexOf(':');
          return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
        }),
      );
      resolve({ statusLine, headers, body: split < 0 ? '' : text.slice(split + 4), closedByServer });
    });
    socket.write(request);
  });
}
