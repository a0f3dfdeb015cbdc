import { Inject, Injectable, OnModuleDestroy } from '@nestjs/common';
import { AuthInfo, CallToolResult, createMcpHandler, McpHttpHandler, McpServer } from '@modelcontextprotocol/server';
import { ErrorCode } from '@mission/contracts';
import { jsonOf } from '@mission/messaging';
import { mapError } from '../http/error-mapping';
import { problemFor } from '../http/problem';
import { problemTypeBase } from '../http/problem.filter';
import { GATEWAY_OPTIONS, GatewayOptions } from '../gateway.options';
import { OperationRunner } from '../operations/operation-runner';
import { advertisedOutputSchema, advertisedSchema, MCP_TOOLS, McpTool } from './mcp-tools';

export const MCP_PATH = '/mcp';
export const MCP_SERVER_INFO = { name: 'mission-service', title: 'Mission Service', version: '1.0.0' } as const;

const INSTRUCTIONS =
  'Mission Service runs missions (long-running jobs that search a knowledge store and may wait for a human approval) for one organisation: ' +
  'the one your token belongs to. Submit with submit_mission and follow it with get_mission; approvals wait in list_pending_hits until approve_hit or reject_hit. ' +
  'Failures come back as tool results with isError and RFC 9457 problem details (status, code, detail, errors).';

/** What the gateway hands each MCP request: the verified caller, never read from headers by the SDK. */
export interface McpCaller {
  readonly subject: string;
  readonly clientId: string;
  readonly scopes: ReadonlySet<string>;
  /** A person's token: the user's name (see OperationCaller). */
  readonly username?: string;
  readonly token: string;
  readonly requestId: string;
}

function toolResult(body: object): CallToolResult {
  // A cached final mission's JSON is kept with it (jsonOf); anything else is encoded here.
  return { content: [{ type: 'text', text: jsonOf(body) }], structuredContent: body as Record<string, unknown> };
}

/**
 * The MCP server behind `/mcp`: the official SDK's stateless handler, which builds a fresh server
 * for every HTTP request (nothing is shared between callers) and answers both the 2026-07-28
 * revision and 2025-era clients. Authentication, the tenant context and the rate limit are the
 * gateway's own and have run before a request gets here.
 */
@Injectable()
export class McpEndpoint implements OnModuleDestroy {
  private readonly handler: McpHttpHandler;
  private readonly typeBase: string;

  constructor(
    private readonly operations: OperationRunner,
    @Inject(GATEWAY_OPTIONS) private readonly options: GatewayOptions,
  ) {
    this.typeBase = problemTypeBase(options);
    this.handler = createMcpHandler(({ authInfo }) => this.server(callerOf(authInfo)), {
      legacy: 'stateless',
      // No subscriptions/listen streams: the tools never change, and an open stream per caller
      // would be a resource one tenant could exhaust for all.
      maxSubscriptions: 0,
      onerror: (error) => options.logger.debug({ err: error }, 'MCP request refused'),
    });
  }

  /** Serves one HTTP exchange for an authenticated caller. */
  serve(request: Request, parsedBody: unknown, caller: McpCaller): Promise<Response> {
    const authInfo: AuthInfo = {
      token: caller.token,
      clientId: caller.clientId,
      scopes: [...caller.scopes],
      extra: { subject: caller.subject, requestId: caller.requestId, ...(caller.username !== undefined ? { username: caller.username } : {}) },
    };
    return this.handler.fetch(request, { authInfo, ...(parsedBody === undefined ? {} : { parsedBody }) });
  }

  async onModuleDestroy(): Promise<void> {
    await this.handler.close();
  }

  private server(caller: McpCaller): McpServer {
    const server = new McpServer(MCP_SERVER_INFO, { instructions: INSTRUCTIONS });
    for (const tool of MCP_TOOLS) {
      server.registerTool(
        tool.name,
        {
          title: tool.title,
          description: tool.description,
          inputSchema: advertisedSchema(tool.input),
          outputSchema: advertisedOutputSchema(tool.output),
          annotations: tool.annotations,
        },
        (args) => this.run(tool, args, caller),
      );
    }
    return server;
  }

  /** Runs a tool as its REST twin would; every failure is a tool result carrying the same problem details. */
  private async run(tool: McpTool, args: Record<string, unknown>, caller: McpCaller): Promise<CallToolResult> {
    try {
      const missing = tool.scopes.filter((scope) => !caller.scopes.has(scope));
      if (missing.length > 0) {
        // The controller answers 403 before this; kept so that no path runs a tool without its scope.
        return this.failure(tool, caller, { code: ErrorCode.InsufficientScope, detail: `This operation needs the scope ${missing.join(' ')}` });
      }
      const { id, ...fields } = args;
      const request = tool.takesId ? { id, fields } : { fields: args };
      return toolResult((await this.operations.run(tool.operation, request, caller)) as object);
    } catch (error) {
      const mapped = mapError(error);
      if (mapped.unexpected) this.options.logger.error({ err: error, requestId: caller.requestId, tool: tool.name }, 'Unhandled error in an MCP tool');
      else if (mapped.internalDetail)
        this.options.logger.warn({ requestId: caller.requestId, tool: tool.name, detail: mapped.internalDetail }, 'MCP tool failed: a dependency is unavailable');
      return this.failure(tool, caller, mapped);
    }
  }

  /**
   * The problem details as the result's text, without structured content: that is reserved for
   * what the tool's outputSchema describes (clients validate it against the schema).
   */
  private failure(tool: McpTool, caller: McpCaller, mapped: Pick<ReturnType<typeof mapError>, 'code' | 'detail' | 'errors'>): CallToolResult {
    const problem = problemFor(mapped.code, mapped.detail, { instance: `${MCP_PATH}#${tool.name}`, requestId: caller.requestId, typeBase: this.typeBase }, mapped.errors);
    return { content: [{ type: 'text', text: JSON.stringify(problem) }], isError: true };
  }
}

function callerOf(authInfo: AuthInfo | undefined): McpCaller {
  const extra = authInfo?.extra as { subject?: unknown; requestId?: unknown; username?: unknown } | undefined;
  if (!authInfo || typeof extra?.subject !== 'string') throw new Error('An MCP request reached the server without its verified caller');
  return {
    subject: extra.subject,
    clientId: authInfo.clientId,
    scopes: new Set(authInfo.scopes),
    token: authInfo.token,
    requestId: typeof extra.requestId === 'string' ? extra.requestId : '',
    ...(typeof extra.username === 'string' ? { username: extra.username } : {}),
  };
}
