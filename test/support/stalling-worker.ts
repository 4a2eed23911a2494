/**
 * A worker that takes a job and then says nothing until the job is taken from it, as one whose
 * engine hung would, or, once `release()` is called, runs it after all, as a very slow one would.
 * Made by wrapping a real worker because a hang cannot be caused on demand.
 */
import type { WorkerEvent, WorkerJob } from "../../src/network/worker-handle.ts";
import { WrappedWorker } from "./wrapped-worker.ts";

export class StallingWorker extends WrappedWorker {
  private released!: () => void;
  private readonly releasing = new Promise<void>((resolve) => (this.released = resolve));

  /** Jobs held so far, and later ones, run on the real worker. */
  release(): void {
    this.released();
  }

  async *run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent> {
    const aborted = new Promise<"aborted">((resolve) => signal.addEventListener("abort", () => resolve("aborted"), { once: true }));
    if ((await Promise.race([aborted, this.releasing])) === "aborted") throw new Error("stalled until the job was taken away");
    yield* this.real.run(job, signal);
  }
}
