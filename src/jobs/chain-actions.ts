/**
 * A job's chain transactions as durable intents. Each is recorded (signature and signed bytes)
 * before it is sent; when the chain confirms it, its ledger effect and the job's new state are
 * written in one database transaction together with the confirmation. After a crash,
 * `resumeOpen()` looks each open one up on the chain and finishes it, sends a fresh copy, or (for
 * an escrow whose job can no longer run) drops it.
 */
import { recordTopup } from "../accounts/accounts.ts";
import type { Chain } from "../chain/chain.ts";
import type { Logger } from "../core/logger.ts";
import type { Tier } from "../core/pricing.ts";
import { emitCreditTopup, emitJobCompleted, emitJobEnded } from "../events/index.ts";
import type { Db } from "../store/db.ts";
import { jobEventFacts, type JobRecord } from "./job-record.ts";
import { getJob, updateJob } from "./job-repo.ts";
import * as money from "./money.ts";

export type ChainActionKind = "deposit" | "escrow" | "settlement" | "refund";

export interface PreparedAction {
  kind: ChainActionKind;
  /** The job id; for a deposit, the wallet address. */
  subject: string;
  signature: string;
  wire: Uint8Array;
  /** What rebuilding the transaction needs beyond the job row (a deposit's credits). */
  params?: { credits?: number };
}

/** The chain refused the transaction itself (as opposed to the chain being unreachable). */
export class ChainRejectedError extends Error {
  constructor(readonly signature: string, readonly reason: string) {
    super(`transaction ${signature} was rejected on-chain: ${reason}`);
    this.name = "ChainRejectedError";
  }
}

/** job.failed for a job whose escrow never reached the chain: its reservation was just released in `tx`. */
async function emitEscrowGivenUp(tx: Db, jobId: string): Promise<void> {
  const job = await getJob(tx, jobId);
  if (job) await emitRefunded(tx, job);
}

/** job.completed for a job whose settlement was just applied in `tx`. */
async function emitSettled(tx: Db, job: JobRecord, settlementTx: string, slot: number): Promise<void> {
  const remaining = await money.availableCredits(tx, job.wallet);
  await emitJobCompleted(tx, { ...jobEventFacts(job), settlementTx, slot, creditsRemaining: remaining });
  await money.checkCreditLow(tx, job.wallet, remaining, false);
}

/** job.failed or job.timeout for a job whose whole reservation was just released in `tx`. */
async function emitRefunded(tx: Db, job: JobRecord): Promise<void> {
  const remaining = await money.availableCredits(tx, job.wallet);
  await emitJobEnded(tx, { ...jobEventFacts(job), creditsRefunded: job.lockedCredits, creditsRemaining: remaining });
  await money.checkCreditLow(tx, job.wallet, remaining, false);
}

export class ChainActions {
  constructor(
    private readonly db: Db,
    private readonly chain: Chain,
    private readonly logger: Logger,
  ) {}

  async prepareEscrow(input: { jobId: string; tier: Tier; wallet: string; credits: number }): Promise<PreparedAction & { escrowAddress: string }> {
    const prepared = await this.chain.prepareLockEscrow(input);
    return { kind: "escrow", subject: input.jobId, signature: prepared.signature, wire: prepared.wire, escrowAddress: prepared.escrowAddress };
  }

  async prepareSettlement(job: JobRecord): Promise<PreparedAction> {
    if (job.workerAddress === null || job.proofHash === null || job.proofSignature === null) {
      throw new Error(`job ${job.id} has no proof to settle`);
    }
    const prepared = await this.chain.prepareSettle({
      jobId: job.id,
      wallet: job.wallet,
      lockedCredits: job.lockedCredits,
      chargedCredits: job.creditsCharged,
      workerPublicKey: job.workerAddress,
      staked: job.workerStaked,
      proofHash: job.proofHash,
      proofSignature: new Uint8Array(Buffer.from(job.proofSignature, "base64")),
    });
    return { kind: "settlement", subject: job.id, ...prepared };
  }

  async prepareRefund(job: JobRecord): Promise<PreparedAction> {
    const prepared = await this.chain.prepareRefund({ jobId: job.id, wallet: job.wallet, lockedCredits: job.lockedCredits });
    return { kind: "refund", subject: job.id, ...prepared };
  }

  async prepareDeposit(wallet: string, credits: number): Promise<PreparedAction> {
    const prepared = await this.chain.prepareDeposit({ wallet, credits });
    return { kind: "deposit", subject: wallet, ...prepared, params: { credits } };
  }

  /** Fund a wallet: its credits are minted on-chain, and credited in the ledger once confirmed. */
  async deposit(wallet: string, credits: number): Promise<string> {
    const action = await this.prepareDeposit(wallet, credits);
    await this.record(this.db, action);
    await this.send(action);
    return action.signature;
  }

  async hasDeposit(wallet: string): Promise<boolean> {
    const rows = await this.db.query("SELECT 1 FROM chain_actions WHERE kind = 'deposit' AND subject = $1 LIMIT 1", [wallet]);
    return rows.length > 0;
  }

  async record(db: Db, action: PreparedAction): Promise<void> {
    await db.query("INSERT INTO chain_actions (signature, kind, subject, params, wire) VALUES ($1, $2, $3, $4, $5)", [
      action.signature,
      action.kind,
      action.subject,
      JSON.stringify(action.params ?? {}),
      action.wire,
    ]);
  }

  /**
   * Send a recorded action and apply its outcome. Resolves with the slot once confirmed; rejects
   * with ChainRejectedError (after applying the failure) when the chain executes and refuses it.
   * A transaction that could not land at all (its blockhash expired) is replaced by a fresh copy
   * once; an escrow is not: its job is given up instead.
   */
  async send(action: PreparedAction, rebuilds = 1): Promise<number> {
    let slot: number;
    try {
      slot = (await this.chain.send(action.wire)).slot;
    } catch (error) {
      if (!this.chain.isRejection(error)) throw error;
      if (error.details.landed) {
        await this.rejected(action, error.details.err);
        throw new ChainRejectedError(action.signature, error.details.err);
      }
      const fresh = await this.replace(action);
      if (fresh === undefined || rebuilds === 0) throw error;
      return this.send(fresh, rebuilds - 1);
    }
    await this.confirmed(action, slot);
    return slot;
  }

  private async confirmed(action: PreparedAction, slot: number): Promise<void> {
    await this.db.transaction(async (tx) => {
      const marked = await tx.query(
        "UPDATE chain_actions SET state = 'confirmed', slot = $2, updated_at = now() WHERE signature = $1 AND state = 'sent' RETURNING signature",
        [action.signature, slot],
      );
      // Already confirmed by a concurrent recovery: its effect is applied, do not apply it twice.
      if (marked.length === 0) return;
      if (action.kind === "deposit") {
        await money.deposit(tx, action.subject, action.params?.credits ?? 0, action.signature);
        await recordTopup(tx, action.subject, new Date());
        const remaining = await money.availableCredits(tx, action.subject);
        await emitCreditTopup(tx, { wallet: action.subject, creditsAdded: action.params?.credits ?? 0, creditsRemaining: remaining, depositTx: action.signature });
        await money.checkCreditLow(tx, action.subject, remaining, false);
        return;
      }
      const job = await getJob(tx, action.subject);
      if (!job) throw new Error(`chain action ${action.signature} names a missing job ${action.subject}`);
      const now = new Date();
      switch (action.kind) {
        case "escrow":
          await updateJob(tx, job.id, { slot });
          break;
        case "settlement":
          await money.settle(tx, job);
          await updateJob(tx, job.id, { status: "settled", slot, completedAt: now });
          await emitSettled(tx, { ...job, status: "settled" }, action.signature, slot);
          break;
        case "refund":
          await money.release(tx, job.id);
          await updateJob(tx, job.id, { slot, completedAt: now, creditsCharged: 0 });
          await emitRefunded(tx, { ...job, refundTx: action.signature });
          break;
      }
    });
  }

  private async rejected(action: PreparedAction, reason: string): Promise<void> {
    this.logger.warn({ signature: action.signature, kind: action.kind, subject: action.subject, reason }, "chain transaction rejected");
    await this.db.transaction(async (tx) => {
      const marked = await tx.query(
        "UPDATE chain_actions SET state = 'failed', error = $2, updated_at = now() WHERE signature = $1 AND state = 'sent' RETURNING signature",
        [action.signature, reason],
      );
      if (marked.length === 0) return;
      if (action.kind === "escrow") {
        // Nothing left the wallet on-chain: release the reservation and end the job.
        await money.release(tx, action.subject);
        await updateJob(tx, action.subject, { status: "failed", failureReason: "escrow_failed", completedAt: new Date() });
        await emitEscrowGivenUp(tx, action.subject);
      }
      // A rejected settlement leaves the job `settling` with its escrow intact; the caller (or
      // recovery) returns the escrow. A rejected refund stays open for the next recovery.
    });
  }

  /** Finish every action left open by a crash. Returns how many were open. */
  async resumeOpen(): Promise<number> {
    const open = await this.db.query<{ signature: string; kind: ChainActionKind; subject: string; params: { credits?: number }; wire: Uint8Array }>(
      "SELECT signature, kind, subject, params, wire FROM chain_actions WHERE state = 'sent' ORDER BY created_at",
    );
    for (const row of open) {
      const action: PreparedAction = { kind: row.kind, subject: row.subject, signature: row.signature, wire: new Uint8Array(row.wire), params: row.params };
      const status = await this.chain.transactionStatus(action.signature);
      if (status?.ok) {
        await this.confirmed(action, status.slot);
      } else if (status) {
        await this.rejected(action, status.err ?? "failed on-chain");
      } else if (action.kind === "escrow") {
        // Never executed, and its job cannot run any more: give the credits back in the ledger
        // (nothing moved on-chain) rather than lock them now.
        await this.replace(action);
      } else {
        await this.send(action).catch((error: unknown) => {
          this.logger.error({ err: error, subject: action.subject, kind: action.kind }, "could not finish a chain action during recovery");
        });
      }
    }
    return open.length;
  }

  /**
   * Retire an action that never reached the chain. Settlements, refunds and deposits get a fresh
   * copy (recorded before it is returned); an escrow's job is failed and its reservation released.
   */
  private async replace(action: PreparedAction): Promise<PreparedAction | undefined> {
    const job = action.kind === "deposit" ? undefined : await getJob(this.db, action.subject);
    let fresh: PreparedAction | undefined;
    if (action.kind === "deposit") fresh = await this.prepareDeposit(action.subject, action.params?.credits ?? 0);
    else if (job && action.kind === "settlement") fresh = await this.prepareSettlement(job);
    else if (job && action.kind === "refund") fresh = await this.prepareRefund(job);
    await this.db.transaction(async (tx) => {
      const marked = await tx.query("UPDATE chain_actions SET state = 'dropped', updated_at = now() WHERE signature = $1 AND state = 'sent' RETURNING signature", [
        action.signature,
      ]);
      if (marked.length === 0) return;
      if (action.kind === "escrow") {
        await money.release(tx, action.subject);
        await updateJob(tx, action.subject, { status: "failed", failureReason: "interrupted", completedAt: new Date() });
        await emitEscrowGivenUp(tx, action.subject);
      }
      if (!fresh) return;
      await this.record(tx, fresh);
      if (fresh.kind === "settlement") await updateJob(tx, fresh.subject, { settlementTx: fresh.signature });
      if (fresh.kind === "refund") await updateJob(tx, fresh.subject, { refundTx: fresh.signature });
    });
    return fresh;
  }

  /**
   * Jobs that were interrupted while running (or whose settlement the chain rejected) and have
   * no chain transaction in flight: their escrow must go back to the wallet.
   */
  async jobsAwaitingReturn(): Promise<JobRecord[]> {
    const rows = await this.db.query<{ id: string }>(
      `SELECT j.id FROM jobs j
        WHERE (j.status IN ('pending', 'processing')
               OR (j.status = 'settling' AND NOT EXISTS (
                     SELECT 1 FROM chain_actions a WHERE a.subject = j.id AND a.kind = 'settlement' AND a.state IN ('sent', 'confirmed'))))
          AND NOT EXISTS (SELECT 1 FROM chain_actions a WHERE a.subject = j.id AND a.state = 'sent')
        ORDER BY j.id`,
    );
    const jobs: JobRecord[] = [];
    for (const { id } of rows) {
      const job = await getJob(this.db, id);
      if (job) jobs.push(job);
    }
    return jobs;
  }
}
