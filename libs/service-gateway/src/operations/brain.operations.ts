import { Inject, Injectable } from '@nestjs/common';
import {
  BrainDocumentView,
  BrainQueryResult,
  BrainQuerySchema,
  DomainError,
  IngestedDocumentView,
  MessageTypes,
  Page,
  PageQuerySchema,
  parseIngestDocument,
  parseOrThrow,
  Topics,
} from '@mission/contracts';
import type { MessageBus } from '@mission/messaging';
import { currentTenant } from '@mission/tenant-context';
import { BUS } from '../gateway.options';
import { TenantRateLimiter } from '../rate-limit/tenant-rate-limiter';

/** Indexing a 10 MiB document takes seconds, far beyond the bus's default request timeout. */
export const INGEST_TIMEOUT_MS = 120_000;

/** The caller's tenant's knowledge store, answered by brain-service. REST routes and MCP tools both call these. */
@Injectable()
export class BrainOperations {
  constructor(
    @Inject(BUS) private readonly bus: MessageBus,
    private readonly tenants: TenantRateLimiter,
  ) {}

  /** Stored within the tenant's storage quota, which brain-service checks as it stores (403 quota_exceeded beyond it). */
  async ingest(body: unknown): Promise<IngestedDocumentView> {
    const document = parseIngestDocument(body);
    const quota = await this.tenants.storageQuotaOf(currentTenant().tenantId);
    if (!quota) throw DomainError.notFound('Tenant');
    return this.bus.request<IngestedDocumentView>(Topics.brainRequests, MessageTypes.brainDocumentIngest, { document, quota }, { timeoutMs: INGEST_TIMEOUT_MS });
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
