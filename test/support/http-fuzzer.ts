import { randomUUID } from 'node:crypto';
import { seededRandom } from './seeded-random';

/**
 * A seeded HTTP fuzzer for the gateway: requests over every route of its OpenAPI document and
 * every MCP tool, valid and hostile in turn (ids, query values, bodies, content types, tokens),
 * each answer checked against what the contract promises of any request (README, "The API at a glance"): never a 5xx, an error under
 * `/api` as problem details (under `/mcp` problem details or a JSON-RPC error), no stack trace in
 * a body, and no connection reset. The same seed sends the same requests.
 */

export interface FuzzTarget {
  readonly gatewayUrl: string;
  /** Tokens to send: a tenant's with every scope, one with a single scope, the operator's. */
  readonly tokens: { readonly tenant: string; readonly narrow: string; readonly operator: string };
  /** Ids that exist (a mission, an approval item, a document, a tenant), so routes get past "not found" too. */
  readonly ids: readonly string[];
}

export interface FuzzFinding {
  readonly request: string;
  readonly problem: string;
}

export interface FuzzReport {
  readonly seed: number;
  readonly requests: number;
  readonly byStatus: Record<string, number>;
  readonly findings: FuzzFinding[];
}

interface Operation {
  readonly method: string;
  readonly path: string;
  readonly query: ReadonlyArray<{ readonly name: string; readonly schema: JsonSchema }>;
  readonly body?: JsonSchema;
}

type JsonSchema = {
  type?: string | string[];
  properties?: Record<string, JsonSchema>;
  required?: string[];
  items?: JsonSchema;
  enum?: unknown[];
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  $ref?: string;
  minimum?: number;
  maximum?: number;
  maxLength?: number;
  additionalProperties?: boolean | JsonSchema;
};

type Random = () => number;

const pick = <T>(random: Random, items: readonly T[]): T => items[Math.floor(random() * items.length)] as T;

/** Strings that have broken parsers somewhere. */
const NASTY_STRINGS = [
  '',
  ' ',
  'a',
  '\u0000',
  'nul\u0000inside',
  '\ud800',
  'lone \udc00 surrogate',
  '😀'.repeat(50),
  '電磁波の誘電率',
  '\u202eevil',
  '../../etc/passwd',
  '%00',
  '%zz',
  "' OR 1=1 --",
  '<script>alert(1)</script>',
  '${jndi:ldap://x}',
  'x'.repeat(2_001),
  'y'.repeat(10_001),
  '0000-01-01T00:00:00Z',
  '2026-01-01T00:00:00-23:59',
  '9'.repeat(400),
  '-1',
  '1e309',
  'NaN',
  'true',
  'null',
  '{"a":1}',
  '\r\nX-Injected: 1',
];

const NASTY_VALUES: unknown[] = [null, true, false, 0, -1, 1.5, 2 ** 53 + 1, -(2 ** 31), 1e308, [], [1, 'a', null], {}, { a: { b: { c: 1 } } }, ...NASTY_STRINGS];

function nastyValue(random: Random): unknown {
  const roll = random();
  if (roll < 0.05) return deep(20 + Math.floor(random() * 40), random() < 0.5);
  if (roll < 0.08) return Array.from({ length: 200 }, (_, index) => index);
  return pick(random, NASTY_VALUES);
}

function deep(levels: number, arrays: boolean): unknown {
  let value: unknown = 1;
  for (let level = 0; level < levels; level++) value = arrays ? [value] : { a: value };
  return value;
}

function resolve(schema: JsonSchema | undefined, document: Record<string, any>): JsonSchema | undefined {
  if (!schema?.$ref) return schema;
  const name = schema.$ref.replace('#/components/schemas/', '');
  return document.components?.schemas?.[name] as JsonSchema | undefined;
}

/** A value the schema accepts as far as a generator without the validator can tell. */
function fromSchema(schema: JsonSchema | undefined, document: Record<string, any>, random: Random, depth = 0): unknown {
  const resolved = resolve(schema, document);
  if (!resolved || depth > 4) return 'value';
  const choices = resolved.anyOf ?? resolved.oneOf;
  if (choices) return fromSchema(pick(random, choices), document, random, depth + 1);
  if (resolved.enum) return pick(random, resolved.enum);
  const type = Array.isArray(resolved.type) ? pick(random, resolved.type) : resolved.type;
  switch (type) {
    case 'object': {
      const out: Record<string, unknown> = {};
      for (const [name, property] of Object.entries(resolved.properties ?? {})) {
        if (resolved.required?.includes(name) || random() < 0.5) out[name] = fromSchema(property, document, random, depth + 1);
      }
      return out;
    }
    case 'array':
      return Array.from({ length: Math.floor(random() * 3) }, () => fromSchema(resolved.items, document, random, depth + 1));
    case 'integer':
    case 'number': {
      const low = resolved.minimum ?? 0;
      const high = Math.min(resolved.maximum ?? 100, low + 100);
      return Math.floor(low + random() * (high - low + 1));
    }
    case 'boolean':
      return random() < 0.5;
    case 'null':
      return null;
    default:
      return pick(random, ['Fuzzed title', 'microwave dielectrics', 'A short objective', randomUUID(), 'starter', 'missions:read']);
  }
}

/** A valid value, then (most of the time) one of its fields broken, dropped or joined by an unknown one. */
function mutate(value: unknown, random: Random): unknown {
  if (random() < 0.25) return value;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return random() < 0.5 ? nastyValue(random) : value;
  const object = { ...(value as Record<string, unknown>) };
  const keys = Object.keys(object);
  const roll = random();
  if (roll < 0.45 && keys.length > 0) object[pick(random, keys)] = nastyValue(random);
  else if (roll < 0.65 && keys.length > 0) delete object[pick(random, keys)];
  else if (roll < 0.8) object[pick(random, ['extra', '__proto__', 'constructor', 'a\u0000b', ''])] = nastyValue(random);
  else if (keys.length > 0) {
    const key = pick(random, keys);
    object[key] = mutate(object[key], random);
  }
  return object;
}

/** Raw bodies no JSON encoder produces. */
const RAW_BODIES = [
  '{',
  '{"title":',
  'not json',
  '[]',
  'null',
  '"text"',
  '1e400',
  '{"a":1,"a":2}',
  '\u0000',
  '\ufeff{}',
  `${'['.repeat(10_000)}${']'.repeat(10_000)}`,
  `${'{"a":'.repeat(3_000)}1${'}'.repeat(3_000)}`,
];

const CONTENT_TYPES = [
  'application/json',
  'application/json; charset=utf-8',
  'text/plain',
  'application/x-www-form-urlencoded',
  'application/json; charset=latin1',
  'multipart/form-data; boundary=x',
  'application/problem+json',
  '',
];

/** A string's UTF-8 bytes as a Latin-1 string: what fetch sends byte for byte in a header. */
function rawBytes(text: string): string {
  return Buffer.from(text, 'utf8').toString('latin1');
}

/** Percent-encoded; a lone surrogate (which encodeURIComponent refuses) becomes bytes that are not UTF-8. */
function percentEncoded(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    return `${encodeURIComponent(text.replace(/[\ud800-\udfff]/g, ''))}%ED%A0%80`;
  }
}

function pathFor(template: string, target: FuzzTarget, random: Random): string {
  return template.replace(/\{[^}]+\}/g, () => {
    const roll = random();
    if (roll < 0.45) return pick(random, target.ids);
    if (roll < 0.6) return randomUUID();
    return percentEncoded(String(pick(random, NASTY_STRINGS))).slice(0, 3_000) || 'x';
  });
}

function queryFor(operation: Operation, document: Record<string, any>, random: Random): string {
  const params = new URLSearchParams();
  for (const { name, schema } of operation.query) {
    if (random() < 0.4) continue;
    const value = random() < 0.5 ? fromSchema(schema, document, random) : nastyValue(random);
    params.append(name, typeof value === 'string' ? value.slice(0, 3_000) : (JSON.stringify(value) ?? 'undefined'));
  }
  if (random() < 0.15) params.append(pick(random, ['cursor', 'limit', 'status', 'q', 'k', 'extra', 'access_token']), String(pick(random, NASTY_STRINGS)).slice(0, 3_000));
  if (random() < 0.05) params.append('cursor', Buffer.from(JSON.stringify({ v: 1, at: pick(random, NASTY_STRINGS), id: randomUUID() })).toString('base64url'));
  const text = params.toString();
  return text ? `?${text}` : '';
}

function tokenFor(target: FuzzTarget, random: Random): string | undefined {
  const roll = random();
  if (roll < 0.6) return target.tokens.tenant;
  if (roll < 0.7) return target.tokens.narrow;
  if (roll < 0.8) return target.tokens.operator;
  if (roll < 0.88) return undefined;
  return pick(random, ['garbage', 'a.b.c', `${target.tokens.tenant}x`, target.tokens.tenant.split('.').slice(0, 2).join('.'), '\u00e9', 'Bearer']);
}

const STACK_TRACE = /\bat .+\.(ts|js):\d+|node_modules\//;

function operationsOf(document: Record<string, any>): Operation[] {
  const operations: Operation[] = [];
  for (const [path, item] of Object.entries<Record<string, any>>(document.paths ?? {})) {
    for (const [method, operation] of Object.entries<Record<string, any>>(item)) {
      if (!['get', 'post', 'put', 'patch', 'delete'].includes(method)) continue;
      const query = ((operation.parameters ?? []) as Array<Record<string, any>>)
        .filter((parameter) => parameter.in === 'query')
        .map((parameter) => ({ name: String(parameter.name), schema: parameter.schema as JsonSchema }));
      const body = operation.requestBody?.content?.['application/json']?.schema as JsonSchema | undefined;
      operations.push({ method: method.toUpperCase(), path, query, body });
    }
  }
  return operations;
}

/** What an MCP client could send: each tool called with fuzzed arguments, and malformed JSON-RPC. */
function mcpMessage(tools: ReadonlyArray<{ name: string; inputSchema?: JsonSchema }>, document: Record<string, any>, random: Random): unknown {
  const roll = random();
  if (roll < 0.7) {
    const tool = pick(random, tools);
    return {
      jsonrpc: '2.0',
      id: Math.floor(random() * 1e6),
      method: 'tools/call',
      params: { name: tool.name, arguments: mutate(fromSchema(tool.inputSchema, document, random), random) },
    };
  }
  return pick(random, [
    { jsonrpc: '2.0', id: 1, method: 'tools/list' },
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'no_such_tool', arguments: {} } },
    { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: pick(random, tools).name, arguments: nastyValue(random) } },
    { jsonrpc: '2.0', id: null, method: 'tools/list' },
    { jsonrpc: '1.0', id: 1, method: 'tools/list' },
    { id: 1, method: 'tools/list' },
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: { a: 1 }, method: 'ping' },
    [
      { jsonrpc: '2.0', id: 1, method: 'tools/list' },
      { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    ],
    { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: pick(random, NASTY_STRINGS), capabilities: {}, clientInfo: { name: 'fuzz', version: '1' } } },
    { jsonrpc: '2.0', id: 1, method: pick(random, NASTY_STRINGS) },
  ]);
}

interface Sent {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body?: string;
}

function describeRequest(sent: Sent): string {
  const body = sent.body === undefined ? '' : ` ${sent.body.length > 300 ? `${sent.body.slice(0, 300)}… (${sent.body.length} chars)` : sent.body}`;
  return `${sent.method} ${sent.url.length > 300 ? `${sent.url.slice(0, 300)}…` : sent.url}${body}`;
}

/** Checks one answer against the promises that hold for any request. */
function check(pathname: string, status: number, contentType: string, text: string): string | undefined {
  if (status >= 500) return `answered ${status}: ${text.slice(0, 300)}`;
  if (STACK_TRACE.test(text)) return `a stack trace in the body: ${text.slice(0, 300)}`;
  if (status < 400) return undefined;
  const underApi = pathname === '/api' || pathname.startsWith('/api/') || pathname === '/mcp';
  if (!underApi) return undefined;
  if (contentType.startsWith('application/problem+json')) {
    try {
      const problem = JSON.parse(text) as Record<string, unknown>;
      if (problem.status !== status || typeof problem.code !== 'string' || typeof problem.requestId !== 'string')
        return `a problem without its status, code or request id: ${text.slice(0, 300)}`;
    } catch {
      return `problem+json that is not JSON: ${text.slice(0, 300)}`;
    }
    return undefined;
  }
  if (pathname === '/mcp' && contentType.startsWith('application/json')) {
    try {
      const message = JSON.parse(text) as { jsonrpc?: unknown; error?: { code?: unknown } };
      if (message.jsonrpc === '2.0' && typeof message.error?.code === 'number') return undefined;
    } catch {
      // reported below
    }
  }
  return `an error that is neither problem details nor (on /mcp) a JSON-RPC error: ${status} ${contentType} ${text.slice(0, 300)}`;
}

export async function fuzzGateway(target: FuzzTarget, seed: number, requests: number, onProgress?: (done: number) => void): Promise<FuzzReport> {
  const random = seededRandom(seed);
  const document = (await (await fetch(`${target.gatewayUrl}/api/openapi.json`)).json()) as Record<string, any>;
  const operations = operationsOf(document);
  const listed = await fetch(`${target.gatewayUrl}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${target.tokens.tenant}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list' }),
  });
  // Answered as JSON or as one server-sent event, as the client's Accept allows.
  const listedText = await listed.text();
  const listedJson = listedText.startsWith('{') ? listedText : (/^data: (.*)$/m.exec(listedText)?.[1] ?? '{}');
  const tools = (JSON.parse(listedJson) as { result?: { tools?: Array<{ name: string; inputSchema?: JsonSchema }> } }).result?.tools ?? [];
  if (operations.length < 10 || tools.length < 5) throw new Error(`The fuzzer found ${operations.length} operations and ${tools.length} tools: not the gateway it expects`);

  const byStatus: Record<string, number> = {};
  const findings: FuzzFinding[] = [];
  for (let sent = 0; sent < requests; sent++) {
    const request = buildRequest(target, operations, tools, document, random);
    const pathname = new URL(request.url).pathname;
    try {
      const response = await fetch(request.url, { method: request.method, headers: request.headers, body: request.body, redirect: 'manual', signal: AbortSignal.timeout(30_000) });
      // An event stream that opened stays open: its status and headers are what is checked, then the client leaves.
      const streaming = response.status === 200 && (response.headers.get('content-type') ?? '').startsWith('text/event-stream');
      if (streaming) await response.body?.cancel();
      const text = streaming ? '' : await response.text();
      byStatus[response.status] = (byStatus[response.status] ?? 0) + 1;
      const problem = check(pathname, response.status, response.headers.get('content-type') ?? '', text);
      if (problem) findings.push({ request: describeRequest(request), problem });
    } catch (error) {
      // fetch refusing what the fuzzer built (before anything was sent) is the fuzzer's bug, not a finding.
      // (By name: fetch's errors come from another realm than the test's under Jest.)
      const { name, message } = error as Error;
      if (!(name === 'TypeError' && message === 'fetch failed') && name !== 'TimeoutError' && name !== 'AbortError') throw error;
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      byStatus.failed = (byStatus.failed ?? 0) + 1;
      findings.push({ request: describeRequest(request), problem: `the request failed: ${cause?.code ?? ''} ${cause?.message ?? String(error)}` });
    }
    if (onProgress && (sent + 1) % 1_000 === 0) onProgress(sent + 1);
  }
  return { seed, requests, byStatus, findings };
}

function buildRequest(
  target: FuzzTarget,
  operations: readonly Operation[],
  tools: ReadonlyArray<{ name: string; inputSchema?: JsonSchema }>,
  document: Record<string, any>,
  random: Random,
): Sent {
  const headers: Record<string, string> = {};
  const token = tokenFor(target, random);
  if (token !== undefined) headers.authorization = random() < 0.97 ? `Bearer ${token}` : `${pick(random, ['Basic', 'bearer', 'Bearer  ', 'Token'])} ${token}`;
  // Header values go out as raw bytes: a non-Latin-1 one as its UTF-8 (what a client that does not encode sends).
  if (random() < 0.05) headers['idempotency-key'] = rawBytes(String(pick(random, ['', 'k', 'x'.repeat(300), '電', 'key with spaces', randomUUID()])));
  if (random() < 0.03) headers.traceparent = String(pick(random, ['00-zz-zz-01', `00-${'0'.repeat(32)}-${'0'.repeat(16)}-01`, 'garbage']));

  if (random() < 0.25) {
    headers.accept = pick(random, ['application/json, text/event-stream', 'application/json, text/event-stream', 'application/json', 'text/event-stream', '*/*']);
    const message = mcpMessage(tools, document, random);
    const raw = random() < 0.08;
    headers['content-type'] = raw ? pick(random, CONTENT_TYPES) : 'application/json';
    if (random() < 0.1) headers['mcp-protocol-version'] = String(pick(random, ['2025-11-25', '2026-07-28', '1999-01-01', 'garbage']));
    const method = random() < 0.95 ? 'POST' : pick(random, ['GET', 'DELETE', 'PUT']);
    return {
      method,
      url: `${target.gatewayUrl}/mcp`,
      headers,
      body: method === 'GET' || method === 'DELETE' ? undefined : raw ? pick(random, RAW_BODIES) : JSON.stringify(message),
    };
  }

  const operation = pick(random, operations);
  const method = random() < 0.95 ? operation.method : pick(random, ['GET', 'POST', 'PATCH', 'DELETE', 'PUT']);
  const url = `${target.gatewayUrl}${pathFor(operation.path, target, random)}${queryFor(operation, document, random)}`;
  if (method === 'GET' || method === 'DELETE') return { method, url, headers };
  const roll = random();
  let body: string | undefined;
  if (roll < 0.7) {
    body = JSON.stringify(mutate(fromSchema(operation.body, document, random), random));
    headers['content-type'] = random() < 0.9 ? 'application/json' : pick(random, CONTENT_TYPES);
  } else if (roll < 0.9) {
    body = pick(random, RAW_BODIES);
    headers['content-type'] = pick(random, CONTENT_TYPES);
  } else if (roll < 0.93) {
    // Just over the route's limit: an 11 MiB document for ingestion, 1 MiB elsewhere.
    const size = operation.path === '/api/brain/documents' ? 11 * 1024 * 1024 + 1 : 1024 * 1024 + 1;
    body = JSON.stringify({ title: 'Big', content: 'z'.repeat(size) });
    headers['content-type'] = 'application/json';
  }
  return { method, url, headers, body };
}
