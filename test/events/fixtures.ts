/** Records for events tests. */
import { newPendingJob, type JobRecord } from "../../src/jobs/job-record.ts";
import { newId } from "../../src/core/ids.ts";

export function sampleJob(wallet: string, changes: Partial<JobRecord> = {}): JobRecord {
  return {
    ...newPendingJob({
      id: newId("job"),
      wallet,
      model: "svc-dev/wiring-model",
      tier: "lite",
      lockedCredits: 4,
      maxTokens: 600,
      promptTokens: 11,
      escrowAddress: "Escrow1111111111111111111111111111111111111",
      escrowTx: "5escrowSig",
    }),
    ...changes,
  };
}
