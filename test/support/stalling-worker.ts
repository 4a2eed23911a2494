/**
 * A worker that takes a job and then says nothing until the job is taken from it, as one whose
 * engine hung would, or, once `release()` is called, runs it after all, as a very slow one would.
 * Made by wrapping a real worker because a hang cannot be caused on demand.
 */
import type { ChatMessage } from "../../src/inference/engine.ts";
import type { WorkerEvent, WorkerHandle, WorkerJob } from "../../src/network/worker-handle.ts";

export class StallingWorker implements WorkerHandle {
  private released!: () => void;
  private readonly releasing = new Promise<void>((resolve) => (this.released = resolve));
  constructor(private readonly real: WorkerHandle) {}

  /** Jobs held so far, and later ones, run on the real worker. */
  release(): void {
    this.released();
  }

  get address() {
    return this.real.address;
  }
  get staked() {
    return this.real.staked;
  }
  models() {
    return this.real.models();
  }
  contextWindow(model: string) {
    return this.real.contextWindow(model);
  }
  countPromptTokens(model: string, messages: ChatMessage[]) {
    return this.real.countPromptTokens(model, messages);
  }

  async *run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent> {
    const aborted = new Promise<"aborted">((resolve) => signal.addEventListener("abort", () => resolve("aborted"), { once: true }));
    if ((await Promise.race([aborted, this.releasing])) === "aborted") throw new Error("stalled until the job was taken away");
    yield* this.real.run(job, signal);
  }
}
