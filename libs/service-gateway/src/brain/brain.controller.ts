import { Body, Controller, Delete, Get, HttpCode, Param, Post, Query, Res } from '@nestjs/common';
import { RouteConfig } from '@nestjs/platform-fastify';
import type { FastifyReply } from 'fastify';
import { BrainDocumentView, BrainQueryResult, IngestedDocumentView, MAX_DOCUMENT_BODY_BYTES, Page, Scopes } from '@mission/contracts';
import { Operation } from '../openapi/operation';
import { BrainOperations } from '../operations/brain.operations';

/** The caller's tenant's knowledge store, answered by brain-service. */
@Controller('api/brain')
export class BrainController {
  constructor(private readonly brain: BrainOperations) {}

  @Post('documents')
  @HttpCode(201)
  @RouteConfig({ bodyLimit: MAX_DOCUMENT_BODY_BYTES })
  @Operation({
    operationId: 'ingestDocument',
    tag: 'Brain',
    summary: 'Store and index a document',
    description: 'Splits the text into passages and indexes them; searchable as soon as this answers. Content up to 10 MiB (UTF-8).',
    access: { scopes: [Scopes.brainWrite] },
    body: {
      schema: 'IngestDocument',
      required: true,
      example: { title: 'Dielectrics', content: 'The dielectric constant of liquids is measured with microwave techniques.', source: 'lab-notes' },
    },
    success: { status: 201, description: 'Created', schema: 'IngestedDocument', location: true },
  })
  async ingest(@Body() body: unknown, @Res({ passthrough: true }) reply: FastifyReply): Promise<IngestedDocumentView> {
    const document = await this.brain.ingest(body);
    void reply.header('Location', `/api/brain/documents/${document.id}`);
    return document;
  }

  /** Newest first. */
  @Get('documents')
  @Operation({
    operationId: 'listDocuments',
    tag: 'Brain',
    summary: "The tenant's documents, newest first",
    access: { scopes: [Scopes.brainRead] },
    query: 'page',
    success: { status: 200, description: 'One page of documents (without their text)', schema: 'BrainDocumentPage' },
  })
  list(@Query() query: Record<string, unknown>): Promise<Page<BrainDocumentView>> {
    return this.brain.listDocuments(query);
  }

  @Get('documents/:id')
  @Operation({
    operationId: 'getDocument',
    tag: 'Brain',
    summary: 'One document (without its text)',
    access: { scopes: [Scopes.brainRead] },
    pathId: 'the document id',
    success: { status: 200, description: 'The document', schema: 'BrainDocument' },
    problems: [404],
  })
  get(@Param('id') id: string): Promise<BrainDocumentView> {
    return this.brain.getDocument(id);
  }

  @Delete('documents/:id')
  @HttpCode(204)
  @Operation({
    operationId: 'deleteDocument',
    tag: 'Brain',
    summary: 'Delete a document with its passages and index entries',
    access: { scopes: [Scopes.brainWrite] },
    pathId: 'the document id',
    success: { status: 204, description: 'Deleted' },
    problems: [404],
  })
  delete(@Param('id') id: string): Promise<void> {
    return this.brain.deleteDocument(id);
  }

  /** Passages best first. */
  @Get('query')
  @Operation({
    operationId: 'queryBrain',
    tag: 'Brain',
    summary: 'The best passages for a query, best first (BM25)',
    description: "Only the caller's tenant's documents are searched. Any text is a valid query; an empty one is 400.",
    access: { scopes: [Scopes.brainRead] },
    query: 'brainQuery',
    success: { status: 200, description: 'Ranked passages', schema: 'BrainQueryResult' },
  })
  query(@Query() query: Record<string, unknown>): Promise<BrainQueryResult> {
    return this.brain.query(query);
  }

  /** The same search with the query in the body: for queries too long for a URL. */
  @Post('query')
  @HttpCode(200)
  @Operation({
    operationId: 'queryBrainWithBody',
    tag: 'Brain',
    summary: 'The best passages for a query sent in the body, best first (BM25)',
    description:
      'The same search as `GET /api/brain/query`, for queries whose URL would pass the 16 KiB limit of a request line and its headers (a query of up to 10,000 characters in any script fits a body). Searches nothing else and changes nothing.',
    access: { scopes: [Scopes.brainRead] },
    body: { schema: 'BrainQueryBody', required: true, example: { q: 'microwave dielectrics', k: 3 } },
    success: { status: 200, description: 'Ranked passages', schema: 'BrainQueryResult' },
  })
  queryWithBody(@Body() body: unknown): Promise<BrainQueryResult> {
    return this.brain.query(body, 'Body');
  }
}
