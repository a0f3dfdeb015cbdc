import { z } from 'zod';

export const BRAIN_QUERY_MAX_K = 50;
export const BRAIN_QUERY_DEFAULT_K = 5;
export const BRAIN_QUERY_MAX_LENGTH = 10_000;

/** Query parameters of `GET /api/brain/query`, and the payload of a `brain.query` request. */
export const BrainQuerySchema = z.strictObject({
  q: z.string().trim().min(1, 'q must not be empty').max(BRAIN_QUERY_MAX_LENGTH),
  k: z.coerce.number().int().min(1).max(BRAIN_QUERY_MAX_K).default(BRAIN_QUERY_DEFAULT_K),
});
export type BrainQueryRequest = z.output<typeof BrainQuerySchema>;

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
