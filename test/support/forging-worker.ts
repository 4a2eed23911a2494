/**
 * A cheating worker: it runs the job honestly but reports a signature that does not match its
 * output. A fault no honest worker produces, so it is made by wrapping a real one.
 */
import type { ChatMessage } from "../../src/inference/engine.ts";
import type { WorkerEvent, WorkerHandle, WorkerJob } from "../../src/network/worker-handle.ts";

export class ForgingWorker implements WorkerHandle {
  constructor(private readonly honest: WorkerHandle) {}

  get address() {
    return this.honest.address;
  }
  get staked() {
    return this.honest.staked;
  }
  models() {
    return this.honest.models();
  }
  contextWindow(model: string) {
    return this.honest.contextWindow(model);
  }
  countPromptTokens(model: string, messages: ChatMessage[]) {
    return this.honest.countPromptTokens(model, messages);
  }

  async *run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent> {
    for await (const event of this.honest.run(job, signal)) {
      if (event.type !== "done") {
        yield event;
        continue;
      }
      const forged = new Uint8Array(event.signature);
      forged[0] = forged[0]! ^ 0xff;
      yield { ...event, signature: forged };
    }
  }
}
