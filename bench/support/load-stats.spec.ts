import { latencySummary, perSecondStats, Samples } from './load-stats';

describe('load statistics', () => {
  it('keeps every sample past its first allocation, in order, and sorts them on demand', () => {
    const samples = new Samples();
    for (let value = 100_000; value > 0; value--) samples.push(value / 100);
    expect(samples.length).toBe(100_000);
    const copy = samples.toArray();
    expect([copy[0], copy[99_999]]).toEqual([1000, 0.01]);
    const sorted = samples.sorted();
    expect([sorted[0], sorted[99_999]]).toEqual([0.01, 1000]);
    // The copy taken before is untouched by the sort.
    expect(copy[0]).toBe(1000);
  });

  it('summarises latencies by nearest rank, to 0.01 ms, and says NaN when there are none', () => {
    const sorted = Float64Array.from({ length: 100 }, (_, index) => index + 1 + 0.004);
    expect(latencySummary(sorted)).toEqual({ mean: 50.5, p50: 50, p90: 90, p99: 99, max: 100 });
    expect(latencySummary(new Float64Array(0))).toEqual({ mean: NaN, p50: NaN, p90: NaN, p99: NaN, max: NaN });
  });

  it('gives the rate per second with its spread', () => {
    expect(perSecondStats([90, 110, 100, 100])).toEqual({ mean: 100, median: 100, min: 90, max: 110, stddev: 7 });
  });
});
