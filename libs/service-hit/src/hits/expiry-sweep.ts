/** What the sweep calls: expires the items past their deadline, at most `max`; how many were due, and expired. */
export interface Expirer {
  expireDue(max: number): Promise<{ due: number; expired: number }>;
}

export interface ExpirySweepOptions {
  /** Between passes while nothing is due: how late past its deadline an item may expire at most (plus a pass). */
  readonly intervalMs?: number;
  /** Due items read per pass; a pass that finds a full batch is followed by another at once. */
  readonly batch?: number;
  readonly onError: (error: unknown) => void;
}

/**
 * Expires approval items when their deadline passes, on every replica: a pass every `intervalMs`
 * (500 ms) reads the items due across tenants and expires each once under its row lock, so
 * replicas running passes at the same time expire nothing twice, and a deadline that passed
 * while no replica ran is handled by the first pass after one starts.
 */
export class ExpirySweep {
  private readonly intervalMs: number;
  private readonly batch: number;
  private timer: NodeJS.Timeout | undefined;
  private passing: Promise<void> | undefined;
  private stopped = true;

  constructor(
    private readonly expirer: Expirer,
    private readonly options: ExpirySweepOptions,
  ) {
    this.intervalMs = options.intervalMs ?? 500;
    this.batch = options.batch ?? 100;
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  /** Runs no more passes; waits for the one under way. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.passing;
  }

  private schedule(delayMs: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.passing = this.pass().finally(() => (this.passing = undefined));
    }, delayMs);
    this.timer.unref();
  }

  private async pass(): Promise<void> {
    let full = false;
    try {
      // A full batch of due items: more may wait (whichever replica expired them).
      full = (await this.expirer.expireDue(this.batch)).due >= this.batch;
    } catch (error) {
      this.options.onError(error);
    }
    this.schedule(full ? 0 : this.intervalMs);
  }
}
