/**
 * A worker that claims a catalog model but serves another: here the real model's output with its
 * wording changed, as a cheaper model's would be, with an honest proof over exactly what it sent.
 * Its proofs verify and its caller cannot tell; only re-running the job elsewhere can. A fault no
 * honest worker produces, so it is made by wrapping a real one.
 */
import type { Signer } from "../../src/core/keys.ts";
import { outputHash } from "../../src/core/proof.ts";
import type { WorkerEvent, WorkerHandle, WorkerJob } from "../../src/network/worker-handle.ts";
import { WrappedWorker } from "./wrapped-worker.ts";

export class OtherModelWorker extends WrappedWorker {
  constructor(
    real: WorkerHandle,
    key: Signer,
  ) {
    super(real, key);
  }

  async *run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent> {
    let text = "";
    for await (const event of this.real.run(job, signal)) {
      if (event.type === "delta") {
        const changed = event.text.replace(/o/g, "0");
        text += changed;
        yield { type: "delta", text: changed };
        continue;
      }
      const hash = outputHash(text);
      yield { ...event, outputHash: hash, signature: this.prove(job.jobId, hash) };
    }
  }
}
