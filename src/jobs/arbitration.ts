/**
 * Arbitration of a disputed job by re-execution (DECISIONS "Disputes", "An open network"): the
 * job's request runs again, with the same messages, parameters and seed, on other workers hosting
 * the model whose word weighs something (network/worker-trust.ts: the operator's seed pool, or
 * a stake), heaviest first, never the original and never a weightless worker. An output hash
 * decides once its re-executors together outweigh the accused worker and every other hash's: the
 * caller's, the dispute is upheld; the worker's, it is rejected; another, or none once three have
 * run, it is inconclusive. Upheld or inconclusive, the treasury pays the charge back to the caller
 * (the program's `resolve`) and releases the caller's bond; rejected, the bond goes to the
 * treasury, which ran the re-executions. Upheld, the worker is suspended from routing and,
 * staked, slashed (`slash`). While the workers that can run it do not weigh enough, arbitration waits, up to the
 * arbitration window, then is inconclusive. Both transactions go through the chain journal, so a
 * restart finishes what a crash interrupted.
 */
import type { ActionOwner, Chain, ChainAction, ChainJournal } from "../chain/index.ts";
import { type Logger, NATIVE_DECIMALS, creditsToBaseUnits, newId, outputHash } from "../core/index.ts";
import { emitWorkerSlashed } from "../events/index.ts";
import * as ledger from "../ledger/index.ts";
import { type Vote, type WorkerPool, type WorkerTrust, weightedVerdict } from "../network/index.ts";
import type { Db } from "../store/index.ts";
import type { DisputeOutcome, JobRecord } from "./job-record.ts";
import { disputedJobs, getJob, mustMoveJob, updateJob } from "./job-repo.ts";
import { generationOf } from "./chat-request.ts";
import { prepareJobResolve } from "./job-chain.ts";
import * as money from "./money.ts";

export interface ArbitrationOptions {
  db: Db;
  chain: Chain;
  journal: ChainJournal;
  pool: WorkerPool;
  /** What each worker's output weighs. */
  trust: WorkerTrust;
  logger: Logger;
  /** How long a dispute may wait for enough other workers before it ends inconclusive (default 72 h). */
  windowMs: number;
  /** Share of a worker's stake an upheld dispute slashes, in basis points; at least the job's value. */
  slashShareBps: bigint;
  /** How often a waiting dispute looks for workers again. */
  retryMs: number;
  /** The share of settled jobs of vouched workers audited by the same re-execution, from 0 to 1. */
  auditShare: number;
  /** The share of settled jobs of proven workers (not vouched for, passed their probation) audited. */
  provenAuditShare: number;
}

/** An upheld dispute slashes a tenth of the worker's stake, or the job's value if that is more. */
export const DEFAULT_SLASH_SHARE_BPS = 1_000n;
/** One settled job in a hundred of a vouched worker is audited... */
export const DEFAULT_AUDIT_SHARE = 0.01;
/** ...and one in twenty of a worker whose only standing is its probation: nothing is at stake for it but that. */
export const DEFAULT_PROVEN_AUDIT_SHARE = 0.05;
/** Re-executions of one job, at most. */
const ARBITERS = 3;
/** How long a re-execution waits for a slot on a busy arbiter before it is skipped. */
const ARBITER_WAIT_MS = 60_000;
/** Native base units one credit is worth when a slash must cover a job's value (1 credit = 0.01 token). */
const NATIVE_UNITS_PER_CREDIT = 10n ** BigInt(NATIVE_DECIMALS) / 100n;

/** What the re-executions of a job found: each one's vote, and what the accused worker's word weighs. */
export interface Reexecution {
  votes: Vote[];
  accusedWeight: bigint;
}

/** The dispute's verdict from its re-executions; undefined while it should wait for more weight. */
export function verdict(job: Pick<JobRecord, "disputeHash" | "proofHash">, found: Reexecution): DisputeOutcome | undefined {
  const agreed = weightedVerdict(found.accusedWeight, found.votes);
  if (agreed === undefined) return found.votes.length >= ARBITERS ? "inconclusive" : undefined;
  if (agreed === job.disputeHash) return "upheld";
  if (agreed === job.proofHash) return "rejected";
  return "inconclusive";
}

/** What an upheld dispute takes from a worker: its share of the stake, at least the job's value, at most all of it. */
export function slashAmount(stake: bigint, creditsCharged: number, shareBps: bigint): bigint {
  const share = (stake * shareBps) / 10_000n;
  const value = BigInt(creditsCharged) * NATIVE_UNITS_PER_CREDIT;
  const wanted = share > value ? share : value;
  return wanted < stake ? wanted : stake;
}

export class Arbitration {
  private readonly running = new Map<string, Promise<void>>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private closed = false;

  constructor(private readonly options: ArbitrationOptions) {
    options.journal.register("resolve", this.resolveOwner());
    options.journal.register("slash", this.slashOwner());
  }

  /** Arbitrates a disputed job unless it is already being arbitrated or decided. Never throws. */
  arbitrate(jobId: string): void {
    if (this.closed || this.running.has(jobId)) return;
    const run = this.run(jobId)
      .catch((error: unknown) => this.options.logger.error({ err: error, job: jobId }, "arbitration failed; it resumes at the next start"))
      .finally(() => this.running.delete(jobId));
    this.running.set(jobId, run);
  }

  /**
   * Audits a random share of settled jobs: the spec's dispute only fires when hashes differ, and a
   * worker serving a cheaper model than it claims signs exactly what it sent. A worker with only
   * its probation behind it is audited more often than one vouched for. Never throws.
   */
  maybeAudit(jobId: string, workerAddress: string): void {
    const share = this.options.pool.vetting(workerAddress) === "proven" ? this.options.provenAuditShare : this.options.auditShare;
    if (this.closed || Math.random() >= share || this.running.has(`audit:${jobId}`)) return;
    const run = this.audit(jobId)
      .catch((error: unknown) => this.options.logger.error({ err: error, job: jobId }, "audit failed"))
      .finally(() => this.running.delete(`audit:${jobId}`));
    this.running.set(`audit:${jobId}`, run);
  }

  /**
   * A worker whose output re-executors outweighing it settle on something else is treated as an
   * upheld dispute without a caller; with too little weight to settle anything, the audit is
   * inconclusive and nobody is blamed.
   */
  private async audit(jobId: string): Promise<void> {
    const job = await getJob(this.options.db, jobId);
    if (!job || job.status !== "settled" || !job.request || !job.workerAddress) return;
    const found = await this.reexecute(job);
    const agreed = weightedVerdict(found.accusedWeight, found.votes);
    const outcome = agreed === undefined ? "inconclusive" : agreed === job.proofHash ? "reproduced" : "fraudulent";
    await updateJob(this.options.db, job.id, { auditOutcome: outcome });
    this.options.logger.info({ job: job.id, worker: job.workerAddress, arbiters: found.votes.length, outcome }, "audit");
    if (outcome !== "fraudulent") return;
    this.options.pool.suspend(job.workerAddress);
    await this.slash(job);
  }

  /** At start: every disputed job without an outcome is arbitrated (again). */
  async resumeOpen(): Promise<number> {
    const open = (await disputedJobs(this.options.db)).filter((j) => j.disputeOutcome === null);
    for (const job of open) this.arbitrate(job.id);
    return open.length;
  }

  /** Stops waiting disputes and lets running arbitrations finish. */
  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await Promise.all(this.running.values());
  }

  private later(jobId: string): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      this.arbitrate(jobId);
    }, this.options.retryMs);
    timer.unref();
    this.timers.add(timer);
  }

  private async run(jobId: string): Promise<void> {
    const job = await getJob(this.options.db, jobId);
    if (!job || job.status !== "disputed" || job.disputeOutcome !== null || job.disputeResolveTx !== null) return;
    const found = job.request ? await this.reexecute(job) : { votes: [], accusedWeight: 0n };
    const expired = Date.now() - (job.disputedAt?.getTime() ?? 0) >= this.options.windowMs;
    const outcome = verdict(job, found) ?? (expired ? "inconclusive" : undefined);
    this.options.logger.info({ job: job.id, arbiters: found.votes.length, outcome: outcome ?? "waiting for workers that weigh enough" }, "arbitration");
    if (outcome === undefined) return this.later(job.id);
    await this.decide(job, outcome);
  }

  /**
   * The request re-run on the weighing workers hosting the model other than its own, heaviest
   * first, until their outputs settle a hash or three have run.
   */
  private async reexecute(job: JobRecord): Promise<Reexecution> {
    const accusedWeight = await this.options.trust.weight(job.workerAddress ?? "");
    const votes: Vote[] = [];
    for (const arbiter of (await this.arbiters(job)).slice(0, ARBITERS)) {
      const hash = await this.runOn(arbiter.address, job);
      if (hash !== undefined) votes.push({ hash, weight: arbiter.weight });
      if (weightedVerdict(accusedWeight, votes) !== undefined) break;
    }
    return { votes, accusedWeight };
  }

  /** The workers hosting the job's model, other than its own, whose word weighs something: heaviest first. */
  private async arbiters(job: JobRecord): Promise<{ address: string; weight: bigint }[]> {
    const hosts = this.options.pool.hosting(job.model).filter((w) => w.address !== job.workerAddress);
    const weighed = await Promise.all(hosts.map(async (w) => ({ address: w.address, weight: await this.options.trust.weight(w.address) })));
    return weighed.filter((w) => w.weight > 0n).sort((a, b) => (a.weight === b.weight ? 0 : a.weight > b.weight ? -1 : 1));
  }

  /**
   * The output hash of the job's request on the worker at `address`; undefined when it cannot run
   * it. The arbiter counts the prompt itself: the job's limit was planned on its worker's count,
   * which a dishonest worker can understate until no honest engine would run the job.
   */
  private async runOn(address: string, job: JobRecord): Promise<string | undefined> {
    const lease = await this.options.pool.lease(job.model, { address }, { waitMs: ARBITER_WAIT_MS });
    if (!lease) return undefined;
    const request = job.request!;
    try {
      const promptTokens = await lease.worker.countPromptTokens(job.model, request.messages);
      let text = "";
      const generation = { ...generationOf(job, request), maxTokens: Math.min(job.maxTokens, lease.worker.contextWindow(job.model) - promptTokens) };
      for await (const event of lease.worker.run({ jobId: newId("job"), model: job.model, request: generation }, new AbortController().signal)) {
        if (event.type === "delta") text += event.text;
      }
      return outputHash(text);
    } catch (error) {
      this.options.logger.warn({ err: error, job: job.id, worker: address }, "an arbiter could not run the job");
      return undefined;
    } finally {
      lease.release();
    }
  }

  /** Records the outcome on-chain (and the slash), through the journal. */
  private async decide(job: JobRecord, outcome: DisputeOutcome): Promise<void> {
    const resolve = await prepareJobResolve(this.options.chain, job, outcome);
    const action: ChainAction = { kind: "resolve", subject: job.id, signature: resolve.signature, wire: resolve.wire, params: { outcome: OUTCOMES.indexOf(outcome) } };
    await this.options.db.transaction(async (tx) => {
      await updateJob(tx, job.id, { disputeResolveTx: action.signature });
      await this.options.journal.record(tx, action);
    });
    await this.options.journal.send(action);
    if (outcome === "upheld" && job.workerAddress) {
      this.options.pool.suspend(job.workerAddress);
      await this.slash(job);
    }
  }

  private async slash(job: JobRecord): Promise<void> {
    const stake = await this.options.chain.slashableStake(job.workerAddress!);
    if (stake === 0n) return;
    const amount = slashAmount(stake, job.creditsCharged, this.options.slashShareBps);
    const prepared = await this.options.chain.prepareSlash({ worker: job.workerAddress!, amount });
    // Stakes stay far below 2^53 base units (9 million tokens), so the amount fits the journal's numbers.
    const action: ChainAction = { kind: "slash", subject: job.id, signature: prepared.signature, wire: prepared.wire, params: { amount: Number(amount) } };
    await this.options.journal.record(this.options.db, action);
    await this.options.journal.send(action);
  }

  private resolveOwner(): ActionOwner {
    return {
      confirmed: async (tx, action) => {
        const job = await getJob(tx, action.subject);
        if (!job) throw new Error(`resolve ${action.signature} names a missing job ${action.subject}`);
        const outcome = OUTCOMES[action.params?.outcome ?? -1]!;
        const returned = outcome === "rejected" ? 0 : job.creditsCharged;
        await mustMoveJob(tx, job, "dispute_resolved", { disputeOutcome: outcome, disputeReturnedCredits: returned, request: null });
        if (returned > 0) await refundCharge(tx, job, returned);
        await money.endDisputeBond(tx, job, outcome === "rejected");
      },
      // Refused (the treasury could not pay): the job stays disputed for the next start to try again.
      rejected: (tx, action) => updateJob(tx, action.subject, { disputeResolveTx: null }),
      rebuild: async () => undefined,
      dropped: (tx, action) => updateJob(tx, action.subject, { disputeResolveTx: null }),
    };
  }

  private slashOwner(): ActionOwner {
    return {
      confirmed: async (tx, action) => {
        const job = await getJob(tx, action.subject);
        await emitWorkerSlashed(tx, {
          workerAddress: job?.workerAddress ?? "",
          slashAmountSvc: Math.floor((action.params?.amount ?? 0) / 10 ** NATIVE_DECIMALS),
          slashTx: action.signature,
          reason: "fraudulent_proof",
          relatedJobId: action.subject,
        });
      },
      rejected: async () => undefined,
      rebuild: async () => undefined,
      dropped: async () => undefined,
    };
  }
}

const OUTCOMES: DisputeOutcome[] = ["upheld", "rejected", "inconclusive"];

/** The treasury pays the caller's charge back, as `resolve` did on-chain. */
async function refundCharge(tx: Db, job: JobRecord, credits: number): Promise<void> {
  await ledger.ensureWalletAccounts(tx, job.wallet);
  await ledger.transfer(tx, {
    id: `dispute_refund:${job.id}`,
    debitAccountId: ledger.TREASURY_ACCOUNT,
    creditAccountId: ledger.walletAccountId(job.wallet),
    amount: creditsToBaseUnits(credits),
    code: "dispute_refund",
    reference: job.id,
  });
  await money.checkCreditLow(tx, job.wallet, await money.availableCredits(tx, job.wallet), false);
}
