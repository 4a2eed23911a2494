/**
 * A real worker with its `run` replaced: the test workers that misbehave (fail, stall, lie, forge,
 * serve another model) delegate everything else to the worker they wrap, through this class.
 */
import type { ChatMessage } from "../../src/inference/engine.ts";
import type { SettlementRequest, WorkerEvent, WorkerHandle, WorkerJob } from "../../src/network/worker-handle.ts";

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
  /** Signs only what the real worker finished: a job whose output the wrapper replaced is refused. */
  signSettlement(request: SettlementRequest) {
    return this.real.signSettlement(request);
  }

  abstract run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent>;
}
