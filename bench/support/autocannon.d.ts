// The part of autocannon's API the benchmark uses (the package ships no type declarations).
declare module 'autocannon' {
  import { EventEmitter } from 'node:events';

  namespace autocannon {
    interface Options {
      url: string;
      connections?: number;
      pipelining?: number;
      duration?: number;
      /** Requests per second over all connections. */
      overallRate?: number;
      /** Seconds before a request counts as timed out. */
      timeout?: number;
      method?: string;
      headers?: Record<string, string>;
      /** Every response body must equal this; others count as mismatches. */
      expectBody?: string;
      /** Every response body must pass this; others count as mismatches. */
      verifyBody?: (body: string) => boolean;
      /** Requests each connection sends in turn (instead of one request to `url`). */
      requests?: Array<{ method?: string; path?: string; headers?: Record<string, string> }>;
      title?: string;
    }

    /** Percentiles and moments of one histogram, as autocannon reports them. */
    interface Histogram {
      average: number;
      mean: number;
      stddev: number;
      min: number;
      max: number;
      total: number;
      p50: number;
      p90: number;
      p99: number;
      [percentile: string]: number;
    }

    interface Result {
      latency: Histogram;
      requests: Histogram;
      throughput: Histogram;
      duration: number;
      samples: number;
      errors: number;
      timeouts: number;
      mismatches: number;
      non2xx: number;
      resets: number;
      statusCodeStats: Record<string, { count: number }>;
      start: Date;
      finish: Date;
    }

    interface Instance extends EventEmitter, PromiseLike<Result> {
      stop(): void;
      on(event: 'start', listener: () => void): this;
      on(event: 'response', listener: (client: unknown, statusCode: number, resBytes: number, responseTimeMs: number) => void): this;
      on(event: 'reqError', listener: (error: Error) => void): this;
      on(event: 'done', listener: (result: Result) => void): this;
      on(event: string, listener: (...args: any[]) => void): this;
    }
  }

  function autocannon(options: autocannon.Options): autocannon.Instance;

  export = autocannon;
}
