/**
 * A worker that takes jobs and fails before producing a token, as one whose engine crashed would.
 * Made by wrapping a real worker because a crash at exactly that moment cannot be caused on demand.
 */
import type { WorkerEvent, WorkerJob } from "../../src/network/worker-handle.ts";
import { WrappedWorker } from "./wrapped-worker.ts";

export class FailingWorker extends WrappedWorker {
  runs = 0;

  // eslint-disable-next-line require-yield
  async *run(_job: WorkerJob, _signal: AbortSignal): AsyncIterable<WorkerEvent> {
    this.runs++;
    throw new Error("engine crashed before its first token");
  }
}
