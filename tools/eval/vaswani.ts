import { readFileSync } from 'node:fs';
import path from 'node:path';

/** The Vaswani (NPL) test collection, as `../shared/data/vaswani-npl/` holds it (see its README). */
export const VASWANI_DIRECTORY = path.join(__dirname, '..', '..', '..', 'shared', 'data', 'vaswani-npl');

/** Terrier defaults, pyterrier's example notebook (nDCG without cut-off). */
export const PUBLISHED_BM25 = { map: 0.2965, ndcg: 0.6212 } as const;

export interface Collection {
  readonly documents: ReadonlyArray<{ readonly docno: string; readonly text: string }>;
  readonly queries: ReadonlyArray<{ readonly qid: string; readonly text: string }>;
  /** Relevant document numbers by query id. */
  readonly qrels: Map<string, Set<string>>;
}

export function loadCollection(directory: string = VASWANI_DIRECTORY): Collection {
  const documents = [...readFileSync(path.join(directory, 'doc-text.trec'), 'utf8').matchAll(/<DOC>\s*<DOCNO>\s*(\S+?)\s*<\/DOCNO>([\s\S]*?)<\/DOC>/g)].map((match) => ({
    docno: match[1] ?? '',
    text: (match[2] ?? '').trim(),
  }));
  const queries = [...readFileSync(path.join(directory, 'query-text.trec'), 'utf8').matchAll(/<num>\s*(\S+?)\s*<\/num>\s*<title>([\s\S]*?)<\/title>/g)].map((match) => ({
    qid: match[1] ?? '',
    text: (match[2] ?? '').trim(),
  }));
  const qrels = new Map<string, Set<string>>();
  for (const line of readFileSync(path.join(directory, 'qrels'), 'utf8').split('\n')) {
    const [qid, , docno, relevance] = line.trim().split(/\s+/);
    if (!qid || !docno || Number(relevance) <= 0) continue;
    qrels.set(qid, (qrels.get(qid) ?? new Set()).add(docno));
  }
  return { documents, queries, qrels };
}
