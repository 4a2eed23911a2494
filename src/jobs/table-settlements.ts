/**
 * Settlements of escrow-table jobs, batched: the charged jobs of one worker on one table wait a
 * moment for each other, then the worker signs their settlement message once (`sign_settlement`:
 * the table, the Merkle root of the jobs' leaves, each slot's charge) and one `settle_batch`
 * transaction pays them all. The batch's transaction is recorded in the chain journal, one action
 * per job sharing its signature, before anyone sends it.
 *
 * A worker that does not sign (gone, refusing, or signing something else) leaves its jobs
 * unsettled: their senders refund them (`refund_slots`), and the worker is not paid.
 */
import { MAX_TABLE_SETTLEMENTS_PER_TRANSACTION, settlementLeaf, type Chain, type ChainAction, type ChainJournal } from "../chain/index.ts";
import { auditPaths, creditsToBaseUnits, leafBytes, leafHash, LingeringBatches } from "../core/index.ts";
import type { WorkerHandle } from "../network/index.ts";
import type { Db } from "../store/index.ts";
import type { JobRecord } from "./job-record.ts";
import { updateJobs } from "./job-repo.ts";
import { traceSettlementBatch } from "./job-spans.ts";

/**
 * How long a batch's first job waits for others before the batch is signed: under load a batch
 * fills in this time, and a lone job's settlement is this much later. Nobody waits on it but the
 * worker's pay (the caller is answered first); each settlement costs two signatures (the fee
 * payer's and the worker's checked one), so at 100 jobs a second 300 ms keeps their fees under
 * 1,000 lamports a job where 100 ms did not (bench:job-cost --job-ms 2000: 615-620 against 1,163).
 */
export const SETTLEMENT_LINGER_MS = 300;

export class TableSettlements {
  /** Batches filling, by worker and table. */
  private readonly batches: LingeringBatches<{ job: JobRecord; worker: WorkerHandle }, ChainAction>;

  constructor(
    private readonly deps: { db: Db; chain: Chain; journal: ChainJournal },
    lingerMs = SETTLEMENT_LINGER_MS,
  ) {
    this.batches = new LingeringBatches((items) => this.signInSlotOrder(items), lingerMs, MAX_TABLE_SETTLEMENTS_PER_TRANSACTION);
  }

  /**
   * The job's settlement, signed by its worker with the others of its batch and recorded with
   * them: resolves with the job's action in it, to send; rejects when the worker did not sign.
   * The job is charged (its proof, tokens and charge recorded) and its escrow has landed.
   */
  settle(job: JobRecord, worker: WorkerHandle): Promise<ChainAction> {
    if (job.escrowTableId === null || job.escrowTableSlot === null) throw new Error(`job ${job.id} is not in an escrow table`);
    return this.batches.add(`${worker.address} ${job.escrowAddress}`, { job, worker });
  }

  /** Sends nothing more to the batches filling: each is signed now. */
  flush(): void {
    this.batches.flush();
  }

  /** In slot order, so that a job's leaf index follows from the batch alone; the actions in the items' order. */
  private async signInSlotOrder(items: readonly { job: JobRecord; worker: WorkerHandle }[]): Promise<ChainAction[]> {
    const jobs = items.map((item) => item.job).sort((a, b) => a.escrowTableSlot! - b.escrowTableSlot!);
    const worker = items[0]!.worker;
    const actions = await traceSettlementBatch(jobs, worker.address, () => this.signAndRecord(worker, jobs));
    return items.map(({ job }) => actions[jobs.indexOf(job)]!);
  }

  /** The worker's signature over the jobs' settlement, the transaction paying from it, and its record. */
  private async signAndRecord(worker: WorkerHandle, jobs: readonly JobRecord[]): Promise<ChainAction[]> {
    const { wallet, escrowAddress } = jobs[0]!;
    const tableId = BigInt(jobs[0]!.escrowTableId!);
    const signature = await worker.signSettlement({
      table: escrowAddress!,
      jobs: jobs.map((job) => ({ jobId: job.id, slot: job.escrowTableSlot!, charge: creditsToBaseUnits(job.creditsCharged), promptTokens: job.promptTokens, completionTokens: job.completionTokens })),
    });
    const settled = jobs.map((job) => ({
      jobId: job.id,
      slot: job.escrowTableSlot!,
      creditsCharged: job.creditsCharged,
      proofHash: job.proofHash!,
      promptTokens: job.promptTokens,
      completionTokens: job.completionTokens,
    }));
    const prepared = await this.deps.chain.prepareTableSettlement({ wallet, tableId, worker: worker.address, signature, jobs: settled });
    const leaves = settled.map((job) => leafHash(leafBytes(settlementLeaf(job))));
    const paths = auditPaths(leaves);
    const leafOf = (i: number) => ({ leafIndex: i, treeSize: leaves.length, path: paths[i]!.map((hash) => Buffer.from(hash).toString("hex")) });
    const shared = jobs.length > 1;
    const actions: ChainAction[] = jobs.map((job) => ({ kind: "settlement", subject: job.id, signature: prepared.signature, wire: prepared.wire, ...(shared ? { shared } : {}) }));
    const changes = jobs.map((_, i) => ({ settlementTx: prepared.signature, settlementLeaf: leafOf(i) }));
    await this.deps.db.transaction(async (tx) => {
      await this.deps.journal.recordAll(tx, actions);
      await updateJobs(tx, jobs.map((job, i) => ({ id: job.id, changes: changes[i]! })));
    });
    // The drivers' records of the jobs follow their rows (the settlement's confirmation reads them).
    jobs.forEach((job, i) => Object.assign(job, changes[i]));
    return actions;
  }
}
