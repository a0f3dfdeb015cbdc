/**
 * Everything the benchmark must undo (processes, databases, temp dirs, a Kafka broker), run in
 * reverse order of registration. A step runs at most once, whether it is triggered early (a
 * target is stopped as soon as it has been measured) or by the final clean-up after success,
 * failure or Ctrl-C.
 */
export class Cleanup {
  private readonly steps: Array<{ readonly name: string; readonly run: () => Promise<void> }> = [];
  private readonly inFlight = new Set<Promise<void>>();
  private running?: Promise<void>;

  constructor(private readonly log: (message: string) => void) {}

  /** Registers a step; the returned function runs it now (once) and reports its failure. */
  add(name: string, fn: () => Promise<unknown>): () => Promise<void> {
    let done: Promise<void> | undefined;
    const run = (): Promise<void> => {
      if (!done) {
        const index = this.steps.indexOf(step);
        if (index >= 0) this.steps.splice(index, 1);
        const started = (async () => {
          await fn();
        })();
        done = started;
        this.inFlight.add(started);
        void started.finally(() => this.inFlight.delete(started)).catch(() => undefined);
      }
      return done;
    };
    const step = { name, run };
    this.steps.push(step);
    return run;
  }

  /** Runs every remaining step, newest first; failures are logged and do not stop the rest. */
  runAll(): Promise<void> {
    this.running ??= (async () => {
      // A step started earlier (a target being stopped) finishes before older steps run.
      await Promise.allSettled([...this.inFlight]);
      while (this.steps.length > 0) {
        const step = this.steps[this.steps.length - 1];
        if (!step) break;
        try {
          await step.run();
        } catch (error) {
          this.log(`clean-up "${step.name}" failed: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
    })().finally(() => {
      this.running = undefined;
    });
    return this.running;
  }
}
