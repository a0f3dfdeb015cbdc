import { BrainQueryResult, BrainQuerySchema, parseOrThrow } from '@mission/contracts';
import { currentTenant } from '@mission/tenant-context';

/**
 * Retrieval over the current tenant's documents. The store itself (ingestion, chunking, BM25
 * ranking) is not built yet, so every query is answered with no passages.
 */
export class BrainService {
  async query(payload: unknown): Promise<BrainQueryResult> {
    const request = parseOrThrow(BrainQuerySchema, payload, 'Query');
    // Tenant-scoped even while empty: a query outside a tenant is refused, never answered for all.
    currentTenant();
    return { query: request.q, results: [] };
  }
}
