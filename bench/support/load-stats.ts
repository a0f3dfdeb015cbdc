/** Nearest-rank percentile of sorted values. */
export function percentile(sorted: Float64Array, fraction: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.ceil(fraction * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] ?? NaN;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] ?? NaN) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

export const round2 = (value: number): number => Math.round(value * 100) / 100;

/** Mean, median, spread of responses per full second. */
export function perSecondStats(perSecond: readonly number[]): { mean: number; median: number; min: number; max: number; stddev: number } {
  const mean = perSecond.reduce((a, b) => a + b, 0) / perSecond.length;
  const variance = perSecond.reduce((a, b) => a + (b - mean) ** 2, 0) / perSecond.length;
  return {
    mean: Math.round(mean),
    median: Math.round(median(perSecond)),
    min: Math.min(...perSecond),
    max: Math.max(...perSecond),
    stddev: Math.round(Math.sqrt(variance)),
  };
}

/** A growable array of float milliseconds: every response's latency, exact. */
export class Samples {
  private values = new Float64Array(1 << 16);
  length = 0;
  push(value: number): void {
    if (this.length === this.values.length) {
      const grown = new Float64Array(this.values.length * 2);
      grown.set(this.values);
      this.values = grown;
    }
    this.values[this.length++] = value;
  }
  /** A copy of the values pushed, in order. */
  toArray(): Float64Array {
    return this.values.slice(0, this.length);
  }
  /** The values pushed, sorted in place (pushing more afterwards keeps them in that order). */
  sorted(): Float64Array {
    return this.values.subarray(0, this.length).sort();
  }
}

/** Mean, p50, p90, p99 and max of sorted milliseconds, to 0.01 ms (NaN when there are none). */
export function latencySummary(sorted: Float64Array): { mean: number; p50: number; p90: number; p99: number; max: number } {
  let sum = 0;
  for (const value of sorted) sum += value;
  const count = sorted.length;
  return {
    mean: round2(count > 0 ? sum / count : NaN),
    p50: round2(percentile(sorted, 0.5)),
    p90: round2(percentile(sorted, 0.9)),
    p99: round2(percentile(sorted, 0.99)),
    max: round2(count > 0 ? (sorted[count - 1] ?? NaN) : NaN),
  };
}
