import { Inject, Injectable } from '@nestjs/common';
import {
  BrainDocumentView,
  BrainQueryResult,
  BrainQuerySchema,
  IngestedDocumentView,
  MessageTypes,
  Page,
  PageQuerySchema,
  parseIngestDocument,
  parseOrThrow,
  Topics,
} from '@mission/contracts';
import type { MessageBus } from '@mission/messaging';
import { BUS } from '../gateway.options';

/** Indexing a 10 MiB document takes seconds, far beyond the bus's default request timeout. */
export const INGEST_TIMEOUT_MS = 120_000;

/** The caller's tenant's knowledge store, answered by brain-service. REST routes and MCP tools both call these. */
@Injectable()
export class BrainOperations {
  constructor(@Inject(BUS) private readonly bus: MessageBus) {}

  ingest(body: unknown): Promise<IngestedDocumentView> {
    return this.bus.request<IngestedDocumentView>(Topics.brainRequests, MessageTypes.brainDocumentIngest, parseIngestDocument(body), { timeoutMs: INGEST_TIMEOUT_MS });
  }

  /** Newest first. */
  listDocuments(query: unknown): Promise<Page<BrainDocumentView>> {
    return this.bus.request<Page<BrainDocumentView>>(Topics.brainRequests, MessageTypes.brainDocumentList, parseOrThrow(PageQuerySchema, query, 'Query'));
  }

  getDocument(id: unknown): Promise<BrainDocumentView> {
    return this.bus.request<BrainDocumentView>(Topics.brainRequests, MessageTypes.brainDocumentGet, { id });
  }

  async deleteDocument(id: unknown): Promise<void> {
    await this.bus.request(Topics.brainRequests, MessageTypes.brainDocumentDelete, { id });
  }

  /** Passages best first; `from` names where the query came (its parameters, or a request body) in errors. */
  query(query: unknown, from: 'Query' | 'Body' = 'Query'): Promise<BrainQueryResult> {
    return this.bus.request<BrainQueryResult>(Topics.brainRequests, MessageTypes.brainQuery, parseOrThrow(BrainQuerySchema, query, from));
  }
}
