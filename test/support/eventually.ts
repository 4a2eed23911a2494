/** Waiting for what the service finishes after it answered: a settlement's confirmation, a refund's. */
import { getJob } from "../../src/jobs/job-repo.ts";
import type { JobRecord } from "../../src/jobs/job-record.ts";
import type { Service } from "../../src/service.ts";

/** `read()` once `done` holds for what it returned; throws naming `what` after `timeoutMs`. */
export async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/**
 * The job once nothing about it is in flight: a JSON reply is sent before the chain confirms the
 * settlement (DECISIONS "Answering before the chain confirms"), and a refund confirms after the
 * job reads `failed`. Waits for `completed_at`, which both confirmations set.
 */
export function jobConcluded(service: Service, jobId: string): Promise<JobRecord> {
  return until(async () => (await getJob(service.db, jobId))!, (job) => job.completedAt !== null, `job ${jobId} to conclude`);
}
