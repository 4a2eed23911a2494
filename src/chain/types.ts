/** What the chain operations take and return. Slots are numbers: they stay below 2^53 for millennia. */
import type { Address } from "@solana/kit";
import type { Tier } from "../core/index.ts";
import type { DecodedInstruction } from "./decode.ts";

export interface PreparedTransaction {
  /** The transaction's id on-chain, known before it is sent. */
  signature: string;
  wire: Uint8Array;
  /** Past this block height the transaction can no longer execute; if it has not, it never will. */
  lastValidBlockHeight: number;
}

export interface ChainReceipt {
  signature: string;
  slot: number;
  /** The transaction had already executed (a re-send); nothing happened twice. */
  alreadyProcessed: boolean;
}

export interface ChainTransaction {
  signature: string;
  slot: number;
  ok: boolean;
  err?: string;
  feePayer: Address;
  logs: string[];
  instructions: DecodedInstruction[];
  /** The calls programs made while it ran, in order; the escrow program's token transfers are here. */
  innerInstructions: DecodedInstruction[];
}

export interface ChainStatus {
  ok: boolean;
  slot: number;
  /** Why it failed, e.g. `InstructionError(0, Custom(2))` for a forged proof. */
  err?: string;
}

export interface DepositInput {
  wallet: string;
  credits: number;
  /** The caller's reference (e.g. a payment id), recorded in the memo. */
  reference?: string;
}

export interface LockEscrowInput {
  jobId: string;
  tier: Tier;
  wallet: string;
  credits: number;
}

export interface SettleInput {
  jobId: string;
  wallet: string;
  creditsLocked: number;
  creditsCharged: number;
  /** The worker's Ed25519 public key, which is also its Solana address. */
  workerPublicKey: string | Uint8Array;
  /** `sha256:<hex>` of the output. */
  proofHash: string;
  /** The worker's signature over `proofMessage(jobId, proofHash)`. */
  proofSignature: Uint8Array;
}

export interface RefundInput {
  jobId: string;
  wallet: string;
  creditsLocked: number;
}

/** Jobs of one wallet locked together into its escrow table `tableId`, in slot order. */
export interface TableLockInput {
  wallet: string;
  tableId: bigint;
  /** Slots the table is created with when this lock opens it (1-255). */
  capacity: number;
  /** The table's next slot (0 for a new table): the jobs take the slots from here, in order. */
  firstSlot: number;
  jobs: readonly { jobId: string; tier: Tier; credits: number }[];
}

/** One job of a table settlement: its slot, its charge, and its leaf (output hash, tokens charged). */
export interface TableSettlementJob {
  jobId: string;
  slot: number;
  creditsCharged: number;
  /** `sha256:<hex>` of the output. */
  proofHash: string;
  promptTokens: number;
  completionTokens: number;
}

/** A worker's jobs of one table settled under its one signature of their settlement message. */
export interface TableSettlementInput {
  wallet: string;
  tableId: bigint;
  worker: string;
  /** The worker's Ed25519 signature over `settlementMessageOf(table, jobs)`. */
  signature: Uint8Array;
  jobs: readonly TableSettlementJob[];
}
