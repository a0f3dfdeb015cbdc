/** A thin HTTP client for driving the public API in tests, the way a client would. */
import { request as httpRequest } from 'node:http';

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

/**
 * A POST whose Content-Length announces `declaredBytes` but that sends only its first bytes: the
 * gateway must refuse it from the header alone. This is how oversized bodies are tested: sending the
 * whole body races the server closing the connection right after its 413, which a client still
 * writing sees as a broken pipe (EPIPE) instead of the response.
 */
export function postDeclaringLength(baseUrl: string, path: string, token: string, declaredBytes: number): Promise<ApiResponse> {
  return new Promise((resolve, reject) => {
    const request = httpRequest(`${baseUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', 'content-length': String(declaredBytes) },
    });
    request.on('response', (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => {
        request.destroy();
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
    request.on('error', reject);
    request.write('{"title":"T","content":"');
  });
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

/** Polls a mission until it reaches a final status. */
export async function waitForMission(baseUrl: string, token: string, id: string, timeoutMs = 30_000): Promise<any> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const response = await call(baseUrl, 'GET', `/api/missions/${id}`, { token });
    if (response.status !== 200) throw new Error(`GET mission answered ${response.status}: ${JSON.stringify(response.body)}`);
    if (['succeeded', 'failed', 'rejected', 'cancelled'].includes(response.body.status)) return response.body;
    if (Date.now() > deadline) throw new Error(`Mission still ${response.body.status} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Polls `probe` until it returns a value, or fails naming `what`. */
export async function eventually<T>(probe: () => Promise<T | undefined>, what: string, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
