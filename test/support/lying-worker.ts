/**
 * A cheating worker: it relays the model's honest output, but its proof names another text, signed
 * with its own key, so the proof verifies for that other text. A fault no honest worker produces,
 * so it is made by wrapping a real one.
 */
import type { Signer } from "../../src/core/keys.ts";
import { outputHash } from "../../src/core/proof.ts";
import type { WorkerEvent, WorkerHandle, WorkerJob } from "../../src/network/worker-handle.ts";
import { WrappedWorker } from "./wrapped-worker.ts";

export class LyingWorker extends WrappedWorker {
  constructor(
    honest: WorkerHandle,
    key: Signer,
    private readonly claimed = "a text the caller never received",
  ) {
    super(honest, key);
  }

  async *run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent> {
    for await (const event of this.real.run(job, signal)) {
      if (event.type !== "done") {
        yield event;
        continue;
      }
      const hash = outputHash(this.claimed);
      yield { ...event, outputHash: hash, signature: this.prove(job.jobId, hash) };
    }
  }
}
