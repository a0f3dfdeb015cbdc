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
