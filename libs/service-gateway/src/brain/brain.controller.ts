import { Body, Controller, Delete, Get, HttpCode, Inject, Param, Post, Query, Res } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import type { FastifyReply } from 'fastify';
import {
  BrainDocumentView,
  BrainQueryResult,
  BrainQuerySchema,
  IngestedDocumentView,
  MAX_DOCUMENT_BODY_BYTES,
  MessageTypes,
  Page,
  PageQuerySchema,
  parseIngestDocument,
  parseOrThrow,
  Scopes,
  Topics,
} from '@mission/contracts';
import type { MessageBus } from '@mission/messaging';
import { TenantScopes } from '../auth/auth.decorators';
import { BUS } from '../gateway.options';

/** Indexing a 10 MiB document takes seconds, far beyond the bus's default request timeout. */
export const INGEST_TIMEOUT_MS = 120_000;

/** The caller's tenant's knowledge store, answered by brain-service. */
@Controller('api/brain')
export class BrainController {
  constructor(@Inject(BUS) private readonly bus: MessageBus) {}

  @Post('documents')
  @HttpCode(201)
  @RouteConfig({ bodyLimit: MAX_DOCUMENT_BODY_BYTES })
  @TenantScopes(Scopes.brainWrite)
  async ingest(@Body() body: unknown, @Res({ passthrough: true }) reply: FastifyReply): Promise<IngestedDocumentView> {
    const document = await this.bus.request<IngestedDocumentView>(Topics.brainRequests, MessageTypes.brainDocumentIngest, parseIngestDocument(body), {
      timeoutMs: INGEST_TIMEOUT_MS,
    });
    void reply.header('Location', `/api/brain/documents/${document.id}`);
    return document;
  }

  /** Newest first. */
  @Get('documents')
  @TenantScopes(Scopes.brainRead)
  list(@Query() query: Record<string, unknown>): Promise<Page<BrainDocumentView>> {
    return this.bus.request<Page<BrainDocumentView>>(Topics.brainRequests, MessageTypes.brainDocumentList, parseOrThrow(PageQuerySchema, query, 'Query'));
  }

  @Get('documents/:id')
  @TenantScopes(Scopes.brainRead)
  get(@Param('id') id: string): Promise<BrainDocumentView> {
    return this.bus.request<BrainDocumentView>(Topics.brainRequests, MessageTypes.brainDocumentGet, { id });
  }

  @Delete('documents/:id')
  @HttpCode(204)
  @TenantScopes(Scopes.brainWrite)
  async delete(@Param('id') id: string): Promise<void> {
    await this.bus.request(Topics.brainRequests, MessageTypes.brainDocumentDelete, { id });
  }

  /** Passages best first. */
  @Get('query')
  @TenantScopes(Scopes.brainRead)
  query(@Query() query: Record<string, unknown>): Promise<BrainQueryResult> {
    return this.bus.request<BrainQueryResult>(Topics.brainRequests, MessageTypes.brainQuery, parseOrThrow(BrainQuerySchema, query, 'Query'));
  }
}
