/**
 * Refunds of escrow-table jobs, batched: the jobs of one table that end without a charge wait a
 * moment for each other, then one `refund_slots` transaction returns all their slots. Each job's
 * move to its refunded or failed status and the batch's record in the chain journal (one action
 * per job, sharing the signature) commit together, before anyone sends it.
 *
 * The program refuses the whole transaction when one of its slots is no longer locked (past the
 * timeout the wallet may have refunded it first): the journal then sends each job's refund alone
 * (the refund owner's `alone`), and the one already refunded is released as such.
 */
import type { Chain, ChainAction, ChainJournal } from "../chain/index.ts";
import { LingeringBatches } from "../core/index.ts";
import type { Db } from "../store/index.ts";
import type { JobRecord } from "./job-record.ts";

/**
 * How long a batch's first refund waits for others before it is signed: under a burst of
 * failures a batch fills in this time, and a lone job's credits come back this much later.
 */
export const REFUND_LINGER_MS = 100;

/** The most slots one refund returns: a transaction's size leaves room for many more. */
export const MAX_REFUNDS_PER_TRANSACTION = 64;

/** A job's part of its batch's record: its move, in the transaction that records the batch. */
export type RecordRefund = (tx: Db, refund: ChainAction) => Promise<void>;

interface Waiting {
  job: JobRecord;
  record: RecordRefund;
}

export class TableRefunds {
  /** Batches filling, by table address. */
  private readonly batches: LingeringBatches<Waiting, ChainAction>;

  constructor(
    private readonly deps: { db: Db; chain: Chain; journal: ChainJournal },
    lingerMs = REFUND_LINGER_MS,
  ) {
    this.batches = new LingeringBatches((waiting) => this.signAndRecord(waiting), lingerMs, MAX_REFUNDS_PER_TRANSACTION);
  }

  /**
   * The job's refund, signed with the others of its table waiting and recorded with them (`record`
   * moves the job in the same transaction): resolves with the job's action, to send. Rejects when
   * the batch could not be signed or recorded: nothing of it is then on its way to the chain, and
   * the job's status is as it was.
   */
  refund(job: JobRecord, record: RecordRefund): Promise<ChainAction> {
    const key = job.escrowAddress;
    if (job.escrowTableId === null || job.escrowTableSlot === null || key === null) throw new Error(`job ${job.id} is not in an escrow table`);
    return this.batches.add(key, { job, record });
  }

  /** Signs every batch filling now (the node is stopping). */
  flush(): void {
    this.batches.flush();
  }

  private async signAndRecord(waiting: readonly Waiting[]): Promise<ChainAction[]> {
    const { wallet, escrowTableId } = waiting[0]!.job;
    const slots = waiting.map((w) => w.job.escrowTableSlot!);
    const prepared = await this.deps.chain.prepareSlotRefunds({ wallet, tableId: BigInt(escrowTableId!), slots });
    const shared = waiting.length > 1;
    const actions: ChainAction[] = waiting.map((w) => ({ kind: "refund", subject: w.job.id, signature: prepared.signature, wire: prepared.wire, ...(shared ? { shared } : {}) }));
    await this.deps.db.transaction(async (tx) => {
      for (const [i, w] of waiting.entries()) await w.record(tx, actions[i]!);
      await this.deps.journal.recordAll(tx, actions);
    });
    return actions;
  }
}
