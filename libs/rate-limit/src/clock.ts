/** Microseconds on a clock that never goes backwards. */
export interface Clock {
  nowMicros(): number;
}

/** The process's monotonic clock. */
export const monotonicClock: Clock = {
  nowMicros: () => Math.floor(performance.now() * 1000),
};

/** A clock that moves only when told to: for tests. */
export class ManualClock implements Clock {
  constructor(private micros = 1_000_000) {}

  nowMicros(): number {
    return this.micros;
  }

  /** Moves to an absolute time (microseconds); never backwards. */
  set(micros: number): void {
    if (micros < this.micros) throw new Error(`A ManualClock does not go backwards (${micros} < ${this.micros})`);
    this.micros = micros;
  }

  advanceMicros(micros: number): void {
    this.set(this.micros + micros);
  }

  advanceSeconds(seconds: number): void {
    this.advanceMicros(Math.round(seconds * 1_000_000));
  }
}
