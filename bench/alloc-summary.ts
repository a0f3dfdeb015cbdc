/**
 * What a server allocated, from an allocation profile `--alloc-prof` wrote (bench/support/alloc-profile.cjs):
 *
 *   node -r ./tools/register.cjs bench/alloc-summary.ts <file.heapprofile> [--top=30] [--requests=<n>]
 *
 * Prints the bytes sampled in all, then the allocation sites (function, file and line) that
 * allocated most themselves and, with what they called, most in all. With `--requests` (the
 * requests the process served while it was profiled, warm-ups included), also per request.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';

/** The parts of a V8 sampling heap profile (HeapProfiler.SamplingHeapProfile) read here. */
export interface HeapProfileNode {
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number };
  readonly selfSize: number;
  readonly children: readonly HeapProfileNode[];
}

export interface AllocationSite {
  readonly site: string;
  readonly bytes: number;
}

export interface AllocationSummary {
  readonly totalBytes: number;
  /** By the bytes a site allocated itself, most first. */
  readonly self: readonly AllocationSite[];
  /** By the bytes a site and what it called allocated (a recursive site counted once per path), most first. */
  readonly inclusive: readonly AllocationSite[];
}

/** The checkout's root: sites in it are named by their path from it. */
const REPO_ROOT = path.resolve(__dirname, '..');

/**
 * `function file:line`: the file from the checkout's root (or from node_modules), the line where
 * the function starts in the code as it ran (for TypeScript, the compiled code: near the source
 * line, not always on it).
 */
export function siteOf(frame: HeapProfileNode['callFrame'], root: string = REPO_ROOT): string {
  const file = frame.url.replace(/^file:\/\//, '');
  const modules = file.lastIndexOf('/node_modules/');
  const shown = modules >= 0 ? file.slice(modules + 1) : file.startsWith(`${root}/`) ? file.slice(root.length + 1) : file;
  return `${frame.functionName || '(anonymous)'} ${shown}:${frame.lineNumber + 1}`;
}

/** The profile's sites ranked (the profile's root, which allocates nothing itself, left out); `root`: as siteOf's. */
export function summarizeHeapProfile(head: HeapProfileNode, top: number, root: string = REPO_ROOT): AllocationSummary {
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let totalBytes = 0;
  // Iterative: a deep call tree must not overflow the stack. Each node's subtree total is added to
  // every site on its path once, however often the site recurs on it.
  const totals = new Map<HeapProfileNode, number>();
  const order: Array<{ node: HeapProfileNode; path: readonly string[] }> = [];
  const stack: Array<{ node: HeapProfileNode; path: readonly string[] }> = [{ node: head, path: [] }];
  while (stack.length > 0) {
    const entry = stack.pop() as { node: HeapProfileNode; path: readonly string[] };
    order.push(entry);
    const site = siteOf(entry.node.callFrame, root);
    const onPath = entry.node === head || entry.path.includes(site) ? entry.path : [...entry.path, site];
    for (const child of entry.node.children) stack.push({ node: child, path: onPath });
  }
  for (let index = order.length - 1; index >= 0; index--) {
    const { node } = order[index] as { node: HeapProfileNode };
    let total = node.selfSize;
    for (const child of node.children) total += totals.get(child) ?? 0;
    totals.set(node, total);
    totalBytes += node.selfSize;
    if (node === head) continue;
    const site = siteOf(node.callFrame, root);
    self.set(site, (self.get(site) ?? 0) + node.selfSize);
  }
  for (const { node, path: ancestors } of order) {
    if (node === head) continue;
    const site = siteOf(node.callFrame, root);
    // Counted at the topmost occurrence of the site on the path only.
    if (ancestors.includes(site)) continue;
    inclusive.set(site, (inclusive.get(site) ?? 0) + (totals.get(node) ?? 0));
  }
  const ranked = (sites: Map<string, number>): AllocationSite[] =>
    [...sites]
      .map(([site, bytes]) => ({ site, bytes }))
      .sort((a, b) => b.bytes - a.bytes || a.site.localeCompare(b.site))
      .slice(0, top);
  return { totalBytes, self: ranked(self), inclusive: ranked(inclusive) };
}

function main(): void {
  const file = process.argv.slice(2).find((arg) => !arg.startsWith('--'));
  if (!file) throw new Error('usage: node -r ./tools/register.cjs bench/alloc-summary.ts <file.heapprofile> [--top=30] [--requests=<n>]');
  const option = (name: string): number | undefined => {
    const raw = process.argv.find((arg) => arg.startsWith(`--${name}=`))?.split('=')[1];
    if (raw === undefined) return undefined;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < 1) throw new Error(`--${name} must be a positive integer`);
    return value;
  };
  const requests = option('requests');
  const profile = JSON.parse(readFileSync(file, 'utf8')) as { head: HeapProfileNode };
  const summary = summarizeHeapProfile(profile.head, option('top') ?? 30);
  const megabytes = (bytes: number): string => (bytes / 1e6).toFixed(1).padStart(9);
  const share = (bytes: number): string => `${((100 * bytes) / Math.max(1, summary.totalBytes)).toFixed(1).padStart(5)} %`;
  const perRequest = (bytes: number): string => (requests ? `${(bytes / requests / 1000).toFixed(2).padStart(8)} kB/req` : '');
  console.log(`${megabytes(summary.totalBytes).trim()} MB sampled${requests ? `, ${(summary.totalBytes / requests / 1000).toFixed(1)} kB per request` : ''}`);
  console.log('\nallocated by the site itself:');
  for (const { site, bytes } of summary.self) console.log(`${megabytes(bytes)} MB ${share(bytes)} ${perRequest(bytes)}  ${site}`);
  console.log('\nallocated by the site and what it called:');
  for (const { site, bytes } of summary.inclusive) console.log(`${megabytes(bytes)} MB ${share(bytes)} ${perRequest(bytes)}  ${site}`);
}

if (require.main === module) main();
