/**
 * A cheating worker: it runs the job honestly but reports a signature that does not match its
 * output. A fault no honest worker produces, so it is made by wrapping a real one.
 */
import type { WorkerEvent, WorkerHandle, WorkerJob } from "../../src/network/worker-handle.ts";
import { WrappedWorker } from "./wrapped-worker.ts";

export class ForgingWorker extends WrappedWorker {
  constructor(
    real: WorkerHandle,
    /** Told as each forged proof is handed over. */
    private readonly onForged: () => void = () => {},
  ) {
    super(real);
  }

  async *run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent> {
    for await (const event of this.real.run(job, signal)) {
      if (event.type !== "done") {
        yield event;
        continue;
      }
      const forged = new Uint8Array(event.signature);
      forged[0] = forged[0]! ^ 0xff;
      this.onForged();
      yield { ...event, signature: forged };
    }
  }
}
