export * from './brain-service';
export * from './brain.config';
export type { TenantIndexKeys } from './index/blind-index';
// The analysis and scoring functions, for the evaluation's offline comparisons.
export { analyze, normalizeText, termFrequencies } from './text/analyzer';
export { ENGLISH_STOPWORDS } from './text/stopwords';
export { BM25_DEFAULTS, idf, lengthNormalisation, queryTermWeight, termScore } from './ranking/bm25';
