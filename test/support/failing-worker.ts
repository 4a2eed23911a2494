/**
 * A worker that takes jobs and fails before producing a token, as one whose engine crashed would,
 * until `failing` is turned off; then it serves as the real worker it wraps. Made by wrapping a
 * real worker because a crash at exactly that moment cannot be caused on demand.
 */
import type { WorkerEvent, WorkerJob } from "../../src/network/worker-handle.ts";
import { WrappedWorker } from "./wrapped-worker.ts";

export class FailingWorker extends WrappedWorker {
  runs = 0;
  failing = true;

  async *run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent> {
    this.runs++;
    if (this.failing) throw new Error("engine crashed before its first token");
    yield* this.real.run(job, signal);
  }
}
