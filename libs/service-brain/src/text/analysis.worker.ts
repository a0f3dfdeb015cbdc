import { TermHasher } from '../index/blind-index';
import type { ChunkingOptions } from './chunker';
import { analyseDocument, packAnalysis, type PackedAnalysis } from './document-analysis';

/** What the service's thread asks of an analysis thread (DocumentAnalyser). */
export interface AnalysisTask {
  readonly tenantId: string;
  /** The tenant's blind-index key. */
  readonly key: Uint8Array;
  readonly content: string;
  readonly title: string;
  readonly chunking: ChunkingOptions;
}

/** Tenants whose hashers (with their caches of recent hashes) this thread keeps. */
const MAX_CACHED_TENANTS = 64;
const hashers = new Map<string, { readonly key: Buffer; readonly hasher: TermHasher }>();

function hasherFor(tenantId: string, key: Uint8Array): TermHasher {
  const keyBytes = Buffer.from(key.buffer, key.byteOffset, key.byteLength);
  const known = hashers.get(tenantId);
  if (known && known.key.equals(keyBytes)) return known.hasher;
  if (!known && hashers.size >= MAX_CACHED_TENANTS) hashers.delete(hashers.keys().next().value as string);
  const hasher = new TermHasher(Buffer.from(keyBytes));
  hashers.set(tenantId, { key: Buffer.from(keyBytes), hasher });
  return hasher;
}

/**
 * One document's analysis, in a few arrays: copied back to the service's thread (a memory copy of
 * about as many bytes as the document; moving them instead would save little, and a result holding
 * several arrays cannot be moved as one).
 */
export default async function analyse(task: AnalysisTask): Promise<PackedAnalysis> {
  return packAnalysis(await analyseDocument(hasherFor(task.tenantId, task.key), task.content, task.title, task.chunking, false));
}
