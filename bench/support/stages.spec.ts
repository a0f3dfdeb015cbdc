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
    expect(result).toEqual({
      process: 'mission-service',
      stage: 'replies produced',
      scraped: true,
      count: 100,
      p50: expect.any(Number),
      p90: expect.any(Number),
      p99: expect.any(Number),
    });
    // 90 in (1, 2] ms, 10 in (5, 10] ms: the median inside the first, p99 inside the second.
    expect(result?.p50).toBeGreaterThan(1);
    expect(result?.p50).toBeLessThanOrEqual(2);
    expect(result?.p99).toBeGreaterThan(5);
    expect(result?.p99).toBeLessThanOrEqual(10);
  });

  it("finds each of the distributed read's stages in the series the servers label it with, and nothing else", async () => {
    // Each server's histograms as libs/runtime/src/metrics.ts names and labels them, one observation per stage, and one beside each that no stage takes.
    const served = async (observations: ReadonlyArray<readonly [name: string, labels: Record<string, string>]>): Promise<string> => {
      const registry = new Registry();
      const histograms = new Map<string, Histogram<string>>();
      for (const [name, labels] of observations) {
        let histogram = histograms.get(name);
        if (!histogram) {
          histogram = new Histogram({ name, help: 'h', labelNames: Object.keys(labels), buckets: EDGES, registers: [registry] });
          histograms.set(name, histogram);
        }
        histogram.observe(labels, 0.001);
      }
      return registry.metrics();
    };
    const gateway = await served([
      ['http_server_request_duration_seconds', { method: 'GET', route: '/api/missions/:id', status_code: '200' }],
      ['http_server_request_duration_seconds', { method: 'GET', route: '/api/missions', status_code: '200' }],
      ['bus_request_duration_seconds', { topic: 'mission.requests.v1', result: 'ok' }],
      ['bus_request_duration_seconds', { topic: 'mission.requests.v1', result: 'error' }],
      ['bus_send_duration_seconds', { topic: 'mission.requests.v1', result: 'ok' }],
      ['bus_send_duration_seconds', { topic: 'brain.requests.v1', result: 'ok' }],
      ['bus_delivery_delay_seconds', { topic: 'replies', group: 'replies' }],
      ['bus_delivery_delay_seconds', { topic: 'notify.events.v1', group: 'gateway-events' }],
    ]);
    const missionService = await served([
      ['bus_delivery_delay_seconds', { topic: 'mission.requests.v1', group: 'mission-service' }],
      ['bus_delivery_delay_seconds', { topic: 'hit.events.v1', group: 'mission-service' }],
      ['bus_handle_duration_seconds', { topic: 'mission.requests.v1', group: 'mission-service', outcome: 'ok' }],
      ['bus_handle_duration_seconds', { topic: 'mission.requests.v1', group: 'mission-service', outcome: 'skipped' }],
      ['bus_send_duration_seconds', { topic: 'replies', result: 'ok' }],
      ['bus_send_duration_seconds', { topic: 'replies', result: 'error' }],
    ]);
    const empty = { gateway: '', 'mission-service': '' };
    const results = stageResults(DISTRIBUTED_READ_STAGES, empty, { gateway, 'mission-service': missionService });
    expect(results.map((result) => [`${result.process}: ${result.stage}`, result.count])).toEqual(DISTRIBUTED_READ_STAGES.map((spec) => [`${spec.process}: ${spec.stage}`, 1]));
  });

  it('counts everything a series holds when its total fell between the scrapes (its process restarted)', async () => {
    const registry = new Registry();
    const before = await scrape((histogram) => {
      for (let index = 0; index < 10; index++) histogram.observe({ topic: 'replies', result: 'ok' }, 0.001);
    }, registry);
    const after = await scrape((histogram) => {
      for (let index = 0; index < 4; index++) histogram.observe({ topic: 'replies', result: 'ok' }, 0.02);
    });
    const [result] = stageResults(
      DISTRIBUTED_READ_STAGES.filter((spec) => spec.stage === 'reply produced'),
      { 'mission-service': before },
      { 'mission-service': after },
    );
    expect(result).toMatchObject({ scraped: true, count: 4 });
    expect(result?.p50).toBeGreaterThan(10);
  });

  it('reports a stage without observations, and one whose process was not read before and after the run, as such', () => {
    const unread = stageResults(DISTRIBUTED_READ_STAGES, { gateway: '' }, { gateway: '', 'mission-service': '' });
    expect(unread).toHaveLength(DISTRIBUTED_READ_STAGES.length);
    expect(unread.every((result) => result.count === 0 && result.p99 === null)).toBe(true);
    expect(unread.map((result) => [result.process, result.scraped])).toEqual(DISTRIBUTED_READ_STAGES.map((spec) => [spec.process, spec.process === 'gateway']));
    expect(stageLines(unread)).toContain('gateway: request, HTTP in to out: no observations');
    expect(stageLines(unread)).toContain('mission-service: request handled: not read before and after the run');
    expect(pausesOf({ gateway: '' }, { gateway: '', 'mission-service': '' }).map((entry) => entry.process)).toEqual(['gateway']);
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
