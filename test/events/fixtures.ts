/** Facts for events tests: what the jobs part hands an emitter about a freshly admitted job. */
import { newId } from "../../src/core/ids.ts";
import type { JobFacts } from "../../src/events/index.ts";

export interface SampleJob extends JobFacts {
  creditsLocked: number;
  creditsCharged: number;
  workerAddress: string | null;
  escrowTx: string | null;
  refundTx: string | null;
  failureReason: string | null;
  promptTokens: number;
  completionTokens: number;
}

export function sampleJob(wallet: string, changes: Partial<SampleJob> = {}): SampleJob {
  return {
    jobId: newId("job"),
    wallet,
    model: "svc-dev/wiring-model",
    tier: "lite",
    status: "pending",
    creditsLocked: 4,
    creditsCharged: 0,
    workerAddress: null,
    escrowTx: "5escrowSig",
    refundTx: null,
    failureReason: null,
    promptTokens: 11,
    completionTokens: 0,
    ...changes,
  };
}
