import { HeapProfileNode, siteOf, summarizeHeapProfile } from './alloc-summary';

const node = (functionName: string, url: string, lineNumber: number, selfSize: number, children: HeapProfileNode[] = []): HeapProfileNode => ({
  callFrame: { functionName, url, lineNumber },
  selfSize,
  children,
});

describe('summarizeHeapProfile', () => {
  // (root) → a (10) → b (5) → a again (3) → c (1); (root) → c (2)
  const profile = node('(root)', '', -1, 0, [
    node('a', 'file:///work/main/libs/x/src/a.ts', 9, 10, [
      node('b', '/work/main/node_modules/lib/b.js', 0, 5, [node('a', 'file:///work/main/libs/x/src/a.ts', 9, 3, [node('c', 'node:c', 4, 1)])]),
    ]),
    node('c', 'node:c', 4, 2),
  ]);

  it('adds up what each site allocated itself, and with what it called, a recursive site once, the root left out', () => {
    const summary = summarizeHeapProfile(profile, 10, '/work/main');
    expect(summary.totalBytes).toBe(21);
    expect(summary.self).toEqual([
      { site: 'a libs/x/src/a.ts:10', bytes: 13 },
      { site: 'b node_modules/lib/b.js:1', bytes: 5 },
      { site: 'c node:c:5', bytes: 3 },
    ]);
    expect(summary.inclusive).toEqual([
      { site: 'a libs/x/src/a.ts:10', bytes: 19 },
      { site: 'b node_modules/lib/b.js:1', bytes: 9 },
      { site: 'c node:c:5', bytes: 3 },
    ]);
  });

  it('keeps the top sites only', () => {
    const summary = summarizeHeapProfile(profile, 2, '/work/main');
    expect(summary.self.map((entry) => entry.site)).toEqual(['a libs/x/src/a.ts:10', 'b node_modules/lib/b.js:1']);
    expect(summary.inclusive).toHaveLength(2);
  });

  it('walks a call tree deeper than the stack would allow a recursion', () => {
    let deep = node('leaf', 'x.js', 0, 7);
    for (let depth = 0; depth < 100_000; depth++) deep = node(`f${depth % 3}`, 'x.js', depth % 3, 1, [deep]);
    const summary = summarizeHeapProfile(node('(root)', '', -1, 0, [deep]), 5);
    expect(summary.totalBytes).toBe(100_007);
    expect(summary.inclusive[0]).toEqual({ site: 'f0 x.js:1', bytes: 100_007 });
  });

  it('names a site by its function, its file from the checkout or from node_modules, and its line', () => {
    const root = '/home/ci/test/checkout';
    expect(siteOf({ functionName: '', url: `file://${root}/apps/gateway/src/main.ts`, lineNumber: 41 }, root)).toBe('(anonymous) apps/gateway/src/main.ts:42');
    expect(siteOf({ functionName: 'parse', url: `file://${root}/node_modules/pkg/test/parse.js`, lineNumber: 0 }, root)).toBe('parse node_modules/pkg/test/parse.js:1');
    expect(siteOf({ functionName: 'nextTick', url: 'node:internal/process/task_queues', lineNumber: 112 }, root)).toBe('nextTick node:internal/process/task_queues:113');
  });
});
