import { Histogram, Registry } from 'prom-client';
import { DISTRIBUTED_READ_STAGES, parseHistograms, pauseLines, pausesOf, quantileOf, stageLines, stageResults } from './stages';

const EDGES = [0.001, 0.002, 0.005, 0.01, 0.025];

async function scrape(observe: (histogram: Histogram<'topic' | 'result'>) => void, registry = new Registry()): Promise<string> {
  const histogram = new Histogram({ name: 'bus_send_duration_seconds', help: 'h', labelNames: ['topic', 'result'], buckets: EDGES, registers: [registry] });
  observe(histogram);
  return registry.metrics();
}

describe('parseHistograms', () => {
  it('reads prom-client text into one series per label set, buckets ascending with +Inf last', async () => {
    const text = await scrape((histogram) => {
      histogram.observe({ topic: 'a', result: 'ok' }, 0.0015);
      histogram.observe({ topic: 'a', result: 'ok' }, 0.02);
      histogram.observe({ topic: 'b', result: 'error' }, 1);
    });
    const series = parseHistograms(text);
    expect(series.map((entry) => entry.labels)).toEqual([
      { topic: 'a', result: 'ok' },
      { topic: 'b', result: 'error' },
    ]);
    expect(series[0]?.buckets).toEqual([
      [0.001, 0],
      [0.002, 1],
      [0.005, 1],
      [0.01, 1],
      [0.025, 2],
      [Infinity, 2],
    ]);
    expect(series[1]?.buckets.at(-1)).toEqual([Infinity, 1]);
  });

  it('unescapes label values and skips lines that are not buckets', () => {
    const text = [
      '# HELP x_seconds h',
      'x_seconds_sum{a="1"} 3',
      'x_seconds_count{a="1"} 2',
      'x_seconds_bucket{a="q\\"uote",le="0.5"} 2',
      'x_seconds_bucket{a="q\\"uote",le="+Inf"} 2 1700000000',
    ].join('\n');
    expect(parseHistograms(text)).toEqual([
      {
        name: 'x_seconds',
        labels: { a: 'q"uote' },
        buckets: [
          [0.5, 2],
          [Infinity, 2],
        ],
      },
    ]);
  });
});

describe('quantileOf', () => {
  const buckets: Array<[number, number]> = [
    [1, 10],
    [2, 30],
    [4, 40],
    [Infinity, 50],
  ];

  it('interpolates linearly within the bucket that holds the rank, from 0 for the first', () => {
    expect(quantileOf(buckets, 0.1)).toBeCloseTo(0.5);
    expect(quantileOf(buckets, 0.5)).toBeCloseTo(1.75);
    expect(quantileOf(buckets, 0.7)).toBeCloseTo(3);
  });

  it('answers the highest finite edge for a rank in +Inf, and null when empty', () => {
    expect(quantileOf(buckets, 0.99)).toBe(4);
    expect(
      quantileOf(
        [
          [1, 0],
          [Infinity, 0],
        ],
        0.5,
      ),
    ).toBeNull();
    expect(quantileOf([], 0.5)).toBeNull();
  });
});

describe('stageResults', () => {
  it('takes only what happened between the two scrapes, summing the series a spec matches', async () => {
    const registry = new Registry();
    let histogram: Histogram<'topic' | 'result'> | undefined;
    const before = await scrape((created) => {
      histogram = created;
      // Before the run: slow observations that must not count.
      for (let index = 0; index < 100; index++) created.observe({ topic: 'replies.gateway.1', result: 'ok' }, 0.02);
    }, registry);
    for (let index = 0; index < 90; index++) histogram?.observe({ topic: 'replies.gateway.1', result: 'ok' }, 0.0015);
    for (let index = 0; index < 10; index++) histogram?.observe({ topic: 'replies.gateway.2', result: 'ok' }, 0.008);
    histogram?.observe({ topic: 'replies.gateway.1', result: 'error' }, 5);
    histogram?.observe({ topic: 'mission.requests.v1', result: 'ok' }, 5);
    const after = await registry.metrics();
    const spec = { process: 'mission-service', stage: 'replies produced', metric: 'bus_send_duration_seconds', labels: { topic: /^replies\./, result: 'ok' } };
    const [result] = stageResults([spec], { 'mission-service': before }, { 'mission-service': after });
    expect(result).toEqual({ process: 'mission-service', stage: 'replies produced', count: 100, p50: expect.any(Number), p90: expect.any(Number), p99: expect.any(Number) });
    // 90 in (1, 2] ms, 10 in (5, 10] ms: the median inside the first, p99 inside the second.
    expect(result?.p50).toBeGreaterThan(1);
    expect(result?.p50).toBeLessThanOrEqual(2);
    expect(result?.p99).toBeGreaterThan(5);
    expect(result?.p99).toBeLessThanOrEqual(10);
  });

  it("finds the distributed read's stages in the series the servers label them with", async () => {
    const registry = new Registry();
    const text = await scrape((histogram) => {
      histogram.observe({ topic: 'replies', result: 'ok' }, 0.001);
      histogram.observe({ topic: 'mission.requests.v1', result: 'ok' }, 0.001);
      histogram.observe({ topic: 'mission.requests.v1', result: 'error' }, 0.001);
    }, registry);
    const counts = Object.fromEntries(
      stageResults(DISTRIBUTED_READ_STAGES, {}, { gateway: text, 'mission-service': text }).map((result) => [`${result.process}: ${result.stage}`, result.count]),
    );
    expect(counts).toEqual({
      'gateway: request, HTTP in to out': 0,
      'gateway: request on the bus, sealing to reply': 0,
      'gateway: request produced': 1,
      'mission-service: request sent → handler': 0,
      'mission-service: request handled': 0,
      'mission-service: reply produced': 1,
      'gateway: reply sent → requester': 0,
    });
  });

  it('reports a stage without observations, or whose process did not answer, as such', () => {
    const results = stageResults(DISTRIBUTED_READ_STAGES, {}, {});
    expect(results).toHaveLength(DISTRIBUTED_READ_STAGES.length);
    expect(results.every((result) => result.count === 0 && result.p99 === null)).toBe(true);
    expect(stageLines(results)[0]).toBe('gateway: request, HTTP in to out: no observations');
  });
});

describe('pausesOf', () => {
  const text = (minor: [number, number], major: [number, number] | undefined, lag = true) =>
    [
      ...(lag
        ? [
            'nodejs_eventloop_lag_p50_seconds{service="gateway"} 0.0101',
            'nodejs_eventloop_lag_p99_seconds{service="gateway"} 0.0252',
            'nodejs_eventloop_lag_max_seconds{service="gateway"} 0.04',
          ]
        : []),
      'nodejs_gc_duration_seconds_bucket{le="0.001",kind="minor",service="gateway"} 3',
      `nodejs_gc_duration_seconds_sum{kind="minor",service="gateway"} ${minor[0]}`,
      `nodejs_gc_duration_seconds_count{kind="minor",service="gateway"} ${minor[1]}`,
      ...(major
        ? [`nodejs_gc_duration_seconds_sum{kind="major",service="gateway"} ${major[0]}`, `nodejs_gc_duration_seconds_count{kind="major",service="gateway"} ${major[1]}`]
        : []),
    ].join('\n');

  it("reads how late the loop ran (less the monitor's period) after the run and the collections the run added, by kind", () => {
    const [pauses] = pausesOf({ gateway: text([1, 100], undefined) }, { gateway: text([1.25, 150], [0.03, 2]) });
    expect(pauses).toEqual({ process: 'gateway', loopDelayMs: { p50: 0.1, p99: 15.2, max: 30 }, gc: { minor: { count: 50, ms: 250 }, major: { count: 2, ms: 30 } } });
    expect(pauseLines([pauses!])).toEqual(['gateway: event loop late by p50 0.1 / p99 15.2 / max 30 ms; GC minor 50 (250 ms), major 2 (30 ms)']);
  });

  it('leaves out kinds the run did not add to, and says when the delay is not served', () => {
    const [pauses] = pausesOf({ gateway: text([1, 100], [0.03, 2]) }, { gateway: text([1, 100], [0.03, 2], false) });
    expect(pauses).toEqual({ process: 'gateway', loopDelayMs: null, gc: {} });
    expect(pauseLines([pauses!])).toEqual(["gateway: event loop's delay not served; GC none"]);
  });
});
