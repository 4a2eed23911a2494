/**
 * A real worker with its `run` replaced: the test workers that misbehave (fail, stall, lie, forge,
 * serve another model) delegate everything else to the worker they wrap, through this class.
 */
import type { ChatMessage } from "../../src/inference/engine.ts";
import type { WorkerEvent, WorkerHandle, WorkerJob } from "../../src/network/worker-handle.ts";

export abstract class WrappedWorker implements WorkerHandle {
  constructor(protected readonly real: WorkerHandle) {}

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

  abstract run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent>;
}
