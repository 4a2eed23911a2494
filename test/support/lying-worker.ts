/**
 * A cheating worker: it relays the model's honest output, but its proof names another text, signed
 * with its own key, so the proof verifies for that other text. A fault no honest worker produces,
 * so it is made by wrapping a real one.
 */
import type { Signer } from "../../src/core/keys.ts";
import { outputHash, proofMessage } from "../../src/core/proof.ts";
import type { ChatMessage } from "../../src/inference/engine.ts";
import type { WorkerEvent, WorkerHandle, WorkerJob } from "../../src/network/worker-handle.ts";

export class LyingWorker implements WorkerHandle {
  constructor(
    private readonly honest: WorkerHandle,
    private readonly key: Signer,
    private readonly claimed = "a text the caller never received",
  ) {}

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
      const hash = outputHash(this.claimed);
      yield { ...event, outputHash: hash, signature: this.key.sign(proofMessage(job.jobId, hash)) };
    }
  }
}
