/**
 * A settlement signed as a worker signs it (WorkerNode.signSettlement), for the test workers that
 * make their own proofs: over the output hashes they proved, and refused for a job they did not.
 */
import { base58Decode, settlementMessageOf } from "../../src/core/index.ts";
import type { Signer } from "../../src/core/keys.ts";
import type { SettlementRequest } from "../../src/network/worker-handle.ts";

/** `proved`: each job's output hash (`sha256:<hex>`) as its proof named it, by job id. */
export function signSettlementOf(signer: Signer, proved: ReadonlyMap<string, string>, request: SettlementRequest): Uint8Array {
  const jobs = request.jobs.map((job) => {
    const hash = proved.get(job.jobId);
    if (hash === undefined) throw new Error(`did not prove job ${job.jobId}`);
    return { ...job, outputHash: Buffer.from(hash.slice("sha256:".length), "hex") };
  });
  return signer.sign(settlementMessageOf(base58Decode(request.table, 32), jobs));
}
