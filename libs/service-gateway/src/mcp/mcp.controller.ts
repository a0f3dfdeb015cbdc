import { Controller, Delete, Get, Inject, Post, Req, Res } from '@nestjs/common';
import { ApiExcludeEndpoint } from '@nestjs/swagger';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Readable } from 'node:stream';
import { DomainError, ErrorCode, MAX_DOCUMENT_BODY_BYTES } from '@mission/contracts';
import { Access, Caller } from '../auth/access';
import { insufficientScopeProblem } from '../auth/authenticate';
import type { Authenticated } from '../auth/authenticated';
import { GATEWAY_OPTIONS, GatewayOptions } from '../gateway.options';
import { Operation } from '../openapi/operation';
import { MCP_TOOL_SCOPES } from './mcp-tools';
import { MCP_PATH, McpEndpoint } from './mcp.endpoint';

/** The scopes the JSON-RPC message of a request needs: a `tools/call` needs its tool's. */
export function scopesNeeded(message: unknown): string[] {
  if (typeof message !== 'object' || message === null) return [];
  const { method, params } = message as { method?: unknown; params?: { name?: unknown } };
  if (method !== 'tools/call' || typeof params?.name !== 'string') return [];
  return [...(MCP_TOOL_SCOPES.get(params.name) ?? [])];
}

/**
 * `/mcp`, Streamable HTTP. The browser Origin was checked before anything else (the gateway's
 * onRequest hook); the route's access declaration had the caller authenticated (401 with the
 * resource metadata otherwise) and the tenant's rate limit charged on arrival, and the tenant
 * context is set; here a tool the token
 * lacks the scope for is refused with 403 `insufficient_scope` before the SDK sees the request.
 */
@Controller('mcp')
export class McpController {
  constructor(
    private readonly endpoint: McpEndpoint,
    @Inject(GATEWAY_OPTIONS) private readonly options: GatewayOptions,
  ) {}

  @Post()
  @Operation({
    operationId: 'mcp',
    tag: 'MCP',
    summary: 'Model Context Protocol, Streamable HTTP (stateless; revisions 2026-07-28 and 2025-11-25)',
    description:
      'JSON-RPC messages of an MCP client. Tools: submit_mission, get_mission, wait_for_mission, list_missions, query_brain, ingest_document, list_pending_hits, approve_hit, reject_hit; ' +
      "each needs the scope of its REST twin (403 `insufficient_scope` otherwise). Tool failures are results with `isError` and problem details. One JSON-RPC message per request: a batch (an array) is refused with 400 `validation_failed`, as the revisions served have no batches; every request takes one token of the tenant's rate limit. " +
      'GET and DELETE answer 405 and `subscriptions/listen` is refused: there are no sessions or streams.',
    access: { scopes: [] },
    // Documents ingested through `ingest_document` may be as large as through REST.
    bodyLimit: MAX_DOCUMENT_BODY_BYTES,
    body: { schema: 'json-rpc', required: true, example: { jsonrpc: '2.0', id: 1, method: 'tools/list' } },
    success: { status: 200, description: 'The JSON-RPC response (202 for a notification)', schema: 'json-rpc' },
  })
  post(@Req() request: FastifyRequest, @Res() reply: FastifyReply, @Caller() caller: Authenticated): Promise<void> {
    // One message per request: the revisions served have no JSON-RPC batches (removed in
    // 2025-06-18), and a batch would run many calls on the one rate-limit token its request took.
    if (Array.isArray(request.body)) {
      throw new DomainError(ErrorCode.ValidationFailed, 'JSON-RPC batches are not supported: send one message per request', [
        { field: 'body', message: 'must be one JSON-RPC message, not an array' },
      ]);
    }
    const missing = scopesNeeded(request.body).filter((scope) => !caller.scopes.has(scope));
    if (missing.length > 0) throw insufficientScopeProblem(this.options.publicUrl, missing);
    return this.forward(request, reply, caller);
  }

  /** Stateless: no stream to resume and no session to end; the SDK answers 405. */
  @Get()
  @Access({ scopes: [] })
  @ApiExcludeEndpoint()
  get(@Req() request: FastifyRequest, @Res() reply: FastifyReply, @Caller() caller: Authenticated): Promise<void> {
    return this.forward(request, reply, caller);
  }

  /** Stateless: no session to end; the SDK answers 405. */
  @Delete()
  @Access({ scopes: [] })
  @ApiExcludeEndpoint()
  delete(@Req() request: FastifyRequest, @Res() reply: FastifyReply, @Caller() caller: Authenticated): Promise<void> {
    return this.forward(request, reply, caller);
  }

  private async forward(request: FastifyRequest, reply: FastifyReply, caller: Authenticated): Promise<void> {
    const webRequest = toWebRequest(request, this.options.publicUrl);
    const response = await this.endpoint.serve(webRequest, request.method === 'POST' ? request.body : undefined, {
      subject: caller.subject,
      clientId: caller.clientId,
      scopes: caller.scopes,
      ...(caller.username !== undefined ? { username: caller.username } : {}),
      token: bearerToken(request),
      requestId: String(request.id),
    });
    const headers: Record<string, string> = {};
    response.headers.forEach((value, name) => {
      // Connection-specific headers are HTTP/1.1's own; HTTP/2 refuses them (RFC 9113 §8.2.2).
      if (!CONNECTION_HEADERS.has(name)) headers[name] = value;
    });
    void reply.status(response.status).headers(headers);
    if (response.body) await reply.send(Readable.fromWeb(response.body as import('node:stream/web').ReadableStream));
    else await reply.send();
  }
}

const CONNECTION_HEADERS = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade']);

function bearerToken(request: FastifyRequest): string {
  return (request.headers.authorization ?? '').replace(/^Bearer[ ]+/i, '');
}

/** The web-standard request the SDK serves; the body already parsed by the gateway travels beside it. */
function toWebRequest(request: FastifyRequest, publicUrl: string): Request {
  const headers = new Headers();
  for (const [name, value] of Object.entries(request.headers)) {
    // HTTP/2 pseudo-headers (`:path`, …) are no headers of the request the SDK sees.
    if (value === undefined || name === 'content-length' || name.startsWith(':')) continue;
    for (const item of Array.isArray(value) ? value : [value]) headers.append(name, item);
  }
  const url = new URL(MCP_PATH, publicUrl);
  const hasBody = request.method === 'POST' && request.body !== undefined;
  return new Request(url, { method: request.method, headers, ...(hasBody ? { body: JSON.stringify(request.body) } : {}) });
}
