export const round2 = (value: number): number => Math.round(value * 100) / 100;

/** A latency distribution, milliseconds rounded to 0.01. */
export interface Percentiles {
  readonly count: number;
  readonly mean: number;
  readonly p50: number;
  readonly p90: number;
  readonly p99: number;
  readonly max: number;
}

/** Nearest-rank percentiles of `values` (NaN for none), rounded to 0.01. */
export function percentiles(values: readonly number[]): Percentiles {
  const sorted = [...values].sort((a, b) => a - b);
  const at = (fraction: number): number => (sorted.length === 0 ? NaN : (sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(fraction * sorted.length) - 1))] ?? NaN));
  const mean = sorted.length === 0 ? NaN : sorted.reduce((sum, value) => sum + value, 0) / sorted.length;
  return { count: sorted.length, mean: round2(mean), p50: round2(at(0.5)), p90: round2(at(0.9)), p99: round2(at(0.99)), max: round2(at(1)) };
}
