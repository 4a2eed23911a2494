/**
 * A worker that takes jobs and fails before producing a token, as one whose engine crashed would.
 * Made by wrapping a real worker because a crash at exactly that moment cannot be caused on demand.
 */
import type { ChatMessage } from "../../src/inference/engine.ts";
import type { WorkerEvent, WorkerHandle, WorkerJob } from "../../src/network/worker-handle.ts";

export class FailingWorker implements WorkerHandle {
  runs = 0;
  constructor(private readonly real: WorkerHandle) {}

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

  // eslint-disable-next-line require-yield
  async *run(_job: WorkerJob, _signal: AbortSignal): AsyncIterable<WorkerEvent> {
    this.runs++;
    throw new Error("engine crashed before its first token");
  }
}
