import { z } from 'zod';
import { DomainError, ErrorCode } from './errors';
import { parseOrThrow } from './validation';

export const BRAIN_QUERY_MAX_K = 50;
export const BRAIN_QUERY_DEFAULT_K = 5;
export const BRAIN_QUERY_MAX_LENGTH = 10_000;

export const BRAIN_LIMITS = {
  titleLength: 500,
  /** UTF-8 bytes of a document's content. */
  contentBytes: 10 * 1024 * 1024,
  sourceLength: 2_000,
  metadataKeys: 50,
  metadataKeyLength: 100,
  metadataValueLength: 2_000,
} as const;

/**
 * Largest request body of `POST /api/brain/documents`: the content limit plus room for JSON
 * escaping and the other fields. A body above it is refused by the HTTP stack (413) before it
 * is parsed; content above `BRAIN_LIMITS.contentBytes` is refused (413) once parsed.
 */
export const MAX_DOCUMENT_BODY_BYTES = BRAIN_LIMITS.contentBytes + 1024 * 1024;

/** Query parameters of `GET /api/brain/query`, and the payload of a `brain.query` request. */
export const BrainQuerySchema = z.strictObject({
  q: z.string().trim().min(1, 'q must not be empty').max(BRAIN_QUERY_MAX_LENGTH),
  k: z.coerce.number().int().min(1).max(BRAIN_QUERY_MAX_K).default(BRAIN_QUERY_DEFAULT_K),
});
export type BrainQueryRequest = z.output<typeof BrainQuerySchema>;

// PostgreSQL text cannot hold U+0000, so stored strings are refused with it rather than altered.
const storableText = (schema: z.ZodString) => schema.refine((value) => !value.includes('\u0000'), { message: 'must not contain NUL characters' });

const DocumentMetadataSchema = z
  .record(storableText(z.string().min(1).max(BRAIN_LIMITS.metadataKeyLength)), storableText(z.string().max(BRAIN_LIMITS.metadataValueLength)))
  .refine((value) => Object.keys(value).length <= BRAIN_LIMITS.metadataKeys, { message: `metadata holds at most ${BRAIN_LIMITS.metadataKeys} keys` });

/** Body of `POST /api/brain/documents`, and the payload of a `brain.document.ingest` request. */
export const IngestDocumentSchema = z.strictObject({
  title: storableText(z.string().trim().min(1).max(BRAIN_LIMITS.titleLength)),
  content: storableText(z.string()).refine((value) => value.trim().length > 0, { message: 'content must not be empty' }),
  source: storableText(z.string().trim().min(1).max(BRAIN_LIMITS.sourceLength)).optional(),
  metadata: DocumentMetadataSchema.optional(),
});
export type IngestDocumentRequest = z.output<typeof IngestDocumentSchema>;

/**
 * Payload of `brain.document.ingest`: the document as the client sent it, and the tenant's
 * storage quota as the gateway read it from the identity provider (brain-service enforces it).
 */
export const IngestDocumentCommandSchema = z.strictObject({
  document: z.unknown(),
  quota: z.strictObject({ documents: z.int().min(0), bytes: z.int().min(0) }),
});

/** Validates a document; content above the size limit is `payload_too_large` (413), not a validation failure. */
export function parseIngestDocument(body: unknown): IngestDocumentRequest {
  const content = typeof body === 'object' && body !== null ? (body as { content?: unknown }).content : undefined;
  if (typeof content === 'string' && content.length > BRAIN_LIMITS.contentBytes / 4 && Buffer.byteLength(content, 'utf8') > BRAIN_LIMITS.contentBytes) {
    throw new DomainError(ErrorCode.PayloadTooLarge, `Document content is larger than ${BRAIN_LIMITS.contentBytes} bytes`);
  }
  return parseOrThrow(IngestDocumentSchema, body, 'Document');
}

/** 201 answer to an ingestion. */
export interface IngestedDocumentView {
  readonly id: string;
  readonly title: string;
  readonly chunkCount: number;
  readonly createdAt: string;
}

/** A stored document as lists and `GET /api/brain/documents/:id` show it (its text is served as passages by queries). */
export interface BrainDocumentView extends IngestedDocumentView {
  readonly source?: string;
  readonly metadata: Record<string, string>;
  /** UTF-8 bytes of the content as ingested. */
  readonly contentBytes: number;
}

/** One passage of a document, as it was indexed, in the document's order. */
export interface PassageView {
  readonly chunkId: string;
  /** 0 for the first passage. */
  readonly ordinal: number;
  readonly text: string;
}

export interface BrainResult {
  readonly documentId: string;
  readonly chunkId: string;
  readonly title: string;
  readonly text: string;
  readonly score: number;
  readonly source?: string;
}

export interface BrainQueryResult {
  readonly query: string;
  readonly results: readonly BrainResult[];
}
