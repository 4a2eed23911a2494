/** A job as stored, and its API representation (spec "Job"). Pure. */
import { type Tier, usdcValue } from "../core/index.ts";
import type { ChatRequest } from "./chat-request.ts";

export const JOB_STATUSES = ["pending", "processing", "settling", "settled", "failed", "refunded", "disputed"] as const;
export type JobStatus = (typeof JOB_STATUSES)[number];

export interface JobRecord {
  id: string;
  wallet: string;
  model: string;
  tier: Tier;
  status: JobStatus;
  creditsLocked: number;
  maxTokens: number;
  creditsCharged: number;
  workerAddress: string | null;
  workerStaked: boolean;
  escrowAddress: string | null;
  escrowTx: string | null;
  settlementTx: string | null;
  refundTx: string | null;
  slot: number | null;
  proofHash: string | null;
  /** The worker's Ed25519 signature over the proof message, base64. Kept so a crash mid-settlement can resend it. */
  proofSignature: string | null;
  promptTokens: number;
  completionTokens: number;
  finishReason: string | null;
  failureReason: string | null;
  createdAt: Date;
  completedAt: Date | null;
  lastTokenAt: Date | null;
  /** The caller's request, kept while the job can be disputed or is in arbitration; null after. */
  request: ChatRequest | null;
  /** A caller's dispute: the hash it says it received, the transaction recording it, and the outcome. */
  disputeHash: string | null;
  disputeTx: string | null;
  disputedAt: Date | null;
  disputeOutcome: DisputeOutcome | null;
  disputeResolveTx: string | null;
  /** What the treasury paid back to the caller when the dispute was upheld or inconclusive. */
  disputeReturnedCredits: number | null;
  /** The bond the dispute holds from the caller's credits: returned unless the dispute is rejected. */
  disputeBondCredits: number | null;
  /** What auditing the job found: its output reproduced by other workers, or not (the worker was slashed). */
  auditOutcome: "reproduced" | "fraudulent" | "inconclusive" | null;
  /** The program's escrow record was deleted after the dispute window, its rent recovered. */
  escrowClosed: boolean;
  /**
   * Set when the job's escrow is a slot of its wallet's escrow table (escrowAddress is then the
   * table's): the table's id and the job's slot in it. Null for an escrow record of its own.
   */
  escrowTableId: number | null;
  escrowTableSlot: number | null;
  /** A table job's leaf in its batch's settlement: its index, the tree's size, the audit path (hex). */
  settlementLeaf: SettlementLeafPlace | null;
}

export interface SettlementLeafPlace {
  leafIndex: number;
  treeSize: number;
  /** Sibling hashes from the leaf up to the root, hex. */
  path: string[];
}

export type DisputeOutcome = "upheld" | "rejected" | "inconclusive";

/** A new job as admitted: credits locked, no worker yet. */
export function newPendingJob(input: {
  id: string;
  wallet: string;
  model: string;
  tier: Tier;
  creditsLocked: number;
  maxTokens: number;
  promptTokens: number;
  escrowAddress: string;
  escrowTx: string;
  request?: ChatRequest;
}): JobRecord {
  // Every field named, not `...input` and then the rest: V8 builds that object through its slow
  // path, tens of times slower than one with every field named, and every admitted job builds one
  // on the gateway's main thread.
  return {
    id: input.id,
    wallet: input.wallet,
    model: input.model,
    tier: input.tier,
    creditsLocked: input.creditsLocked,
    maxTokens: input.maxTokens,
    promptTokens: input.promptTokens,
    escrowAddress: input.escrowAddress,
    escrowTx: input.escrowTx,
    status: "pending",
    creditsCharged: 0,
    workerAddress: null,
    workerStaked: false,
    settlementTx: null,
    refundTx: null,
    slot: null,
    proofHash: null,
    proofSignature: null,
    completionTokens: 0,
    finishReason: null,
    failureReason: null,
    createdAt: new Date(),
    completedAt: null,
    lastTokenAt: null,
    request: input.request ?? null,
    disputeHash: null,
    disputeTx: null,
    disputedAt: null,
    disputeOutcome: null,
    disputeResolveTx: null,
    disputeReturnedCredits: null,
    disputeBondCredits: null,
    auditOutcome: null,
    escrowClosed: false,
    escrowTableId: null,
    escrowTableSlot: null,
    settlementLeaf: null,
  };
}

/**
 * Whether a job has ended for its caller, and when: charged once its proof and charge are
 * recorded (settling, settled, disputed), not charged when it failed or was refunded; undefined
 * while it runs (pending, processing).
 */
export function jobEnding(job: JobRecord): { endedAt: Date; charged: boolean } | undefined {
  if (job.status === "pending" || job.status === "processing") return undefined;
  const charged = job.status === "settling" || job.status === "settled" || job.status === "disputed";
  return { endedAt: job.completedAt ?? job.createdAt, charged };
}

/** The job object of the API. */
export function jobToApi(job: JobRecord): Record<string, unknown> {
  return {
    id: job.id,
    object: "job",
    status: job.status,
    model: job.model,
    tier: job.tier,
    credits_charged: job.creditsCharged,
    usdc_value: usdcValue(job.creditsCharged),
    worker_address: job.workerAddress,
    created_at: job.createdAt.toISOString(),
    completed_at: job.completedAt ? job.completedAt.toISOString() : null,
    on_chain: {
      escrow_tx: job.escrowTx,
      settlement_tx: job.settlementTx,
      escrow_address: job.escrowAddress,
      slot: job.slot,
      proof_hash: job.proofHash,
      refund_tx: job.refundTx,
      ...(job.escrowTableId !== null ? { receipt: receiptOf(job) } : {}),
    },
    usage: {
      prompt_tokens: job.promptTokens,
      completion_tokens: job.completionTokens,
      total_tokens: job.promptTokens + job.completionTokens,
    },
    dispute: job.disputeTx === null ? null : {
      your_hash: job.disputeHash,
      worker_hash: job.proofHash,
      dispute_tx: job.disputeTx,
      opened_at: job.disputedAt ? job.disputedAt.toISOString() : null,
      outcome: job.disputeOutcome,
      resolve_tx: job.disputeResolveTx,
      credits_returned: job.disputeReturnedCredits,
      bond_credits: job.disputeBondCredits,
    },
  };
}

/**
 * A table job's receipt, once its settlement is recorded: what `svc verify --receipt` checks
 * against the chain (its slot's lock, the worker's signature over the batch's root, its leaf up
 * the path to that root, the payouts). Null before.
 */
function receiptOf(job: JobRecord): Record<string, unknown> | null {
  if (job.settlementLeaf === null || job.proofHash === null) return null;
  return {
    table: job.escrowAddress,
    slot: job.escrowTableSlot,
    leaf_index: job.settlementLeaf.leafIndex,
    tree_size: job.settlementLeaf.treeSize,
    path: job.settlementLeaf.path,
    prompt_tokens: job.promptTokens,
    completion_tokens: job.completionTokens,
    proof_hash: job.proofHash,
    escrow_tx: job.escrowTx,
    settlement_tx: job.settlementTx,
  };
}

/** What the job events say about a job (events/facts.ts); each call site adds the change's own figures. */
export function jobEventFacts(job: JobRecord) {
  return {
    jobId: job.id,
    wallet: job.wallet,
    model: job.model,
    tier: job.tier,
    status: job.status,
    creditsLocked: job.creditsLocked,
    creditsCharged: job.creditsCharged,
    workerAddress: job.workerAddress,
    escrowTx: job.escrowTx,
    refundTx: job.refundTx,
    failureReason: job.failureReason,
    promptTokens: job.promptTokens,
    completionTokens: job.completionTokens,
  };
}
