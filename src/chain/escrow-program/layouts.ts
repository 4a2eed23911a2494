/**
 * The program's account layouts, error codes and statuses, mirroring program/src/escrow.h byte
 * for byte (test/program checks the sizes against accounts the program writes).
 */
import type { Address } from "@solana/kit";
import type { Tier } from "../../core/index.ts";
import { toAddress } from "../addresses.ts";

export const CONFIG_SIZE = 288;
export const ESCROW_SIZE = 256;
export const STAKE_SIZE = 128;
export const DISPUTE_SIZE = 128;
/** An escrow table's header; its slots follow, SLOT_SIZE bytes each. */
export const TABLE_HEADER_SIZE = 96;
export const SLOT_SIZE = 12;
/** Seconds after a table opens during which further locks may join it. */
export const TABLE_APPEND_WINDOW_S = 60;

export const Tag = { config: 1, escrow: 2, stake: 3, dispute: 4, table: 5 } as const;

/**
 * A job escrow's life. A dispute holds a settled escrow `disputed`; its resolution settles it again
 * (rejected) or `reversed` it (the treasury paid the charge back to the vault).
 */
export const EscrowStatus = { locked: 1, settled: 2, refunded: 3, disputed: 4, reversed: 5 } as const;
export type EscrowStatusName = keyof typeof EscrowStatus;

/** The program's custom error codes (`InstructionError(i, Custom(n))`). */
export const ProgramError = {
  invalidInstruction: 1,
  notEnoughAccounts: 2,
  missingSigner: 3,
  notWritable: 4,
  wrongOwner: 5,
  wrongAddress: 6,
  wrongMint: 7,
  wrongTokenOwner: 8,
  invalidConfig: 9,
  alreadyExists: 10,
  insufficientFunds: 11,
  overflow: 12,
  wrongStatus: 13,
  proofMissing: 14,
  chargeExceedsLock: 15,
  tooEarly: 16,
  invalidAmount: 17,
  wrongAccountType: 18,
  invalidJobId: 19,
  sameHash: 20,
  windowClosed: 21,
  windowOpen: 22,
  tableFull: 23,
  wrongSlot: 24,
} as const;
export type ProgramErrorName = keyof typeof ProgramError;

export interface EscrowConfig {
  serviceAuthority: Address;
  treasury: Address;
  usdcMint: Address;
  stakeMint: Address;
  escrowPool: Address;
  stakePool: Address;
  vaultAuthority: Address;
  workerShareBps: number;
  stakedWorkerShareBps: number;
  minActiveStake: bigint;
  jobTimeoutSeconds: bigint;
  disputeWindowSeconds: bigint;
  unstakeCooldownSeconds: bigint;
}

export interface JobEscrow {
  status: EscrowStatusName;
  tier: number;
  jobId: string;
  wallet: Address;
  vault: Address;
  /** Set by settlement; the all-zero address before. */
  worker: Address;
  proofHash: Uint8Array;
  workerStaked: boolean;
  amountLocked: bigint;
  lockedAt: bigint;
  charge: bigint;
  workerPaid: bigint;
  treasuryPaid: bigint;
  returned: bigint;
  closedAt: bigint;
}

export interface WorkerStake {
  worker: Address;
  /** A slashed stake never earns the staked share again. */
  slashed: boolean;
  active: bigint;
  unstaking: bigint;
  unstakeRequestedAt: bigint;
  slashedTotal: bigint;
  lastSlashedAt: bigint;
}

export interface JobDispute {
  outcome: "open" | "upheld" | "rejected" | "inconclusive";
  /** The job's escrow, or the table whose `slot` is disputed. */
  escrow: Address;
  slot: number | null;
  callerHash: Uint8Array;
  openedAt: bigint;
  resolvedAt: bigint;
  /** The charge the treasury paid back to the vault (upheld or inconclusive). */
  returned: bigint;
  /** The caller's bond, held in the pool until the outcome: back to the vault, or to the treasury when rejected. */
  bond: bigint;
}

function reader(data: Uint8Array, tag: number, size: number, what: string) {
  if (data.length < size || data[0] !== tag) throw new Error(`not an escrow-program ${what} account`);
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength);
  return {
    key: (at: number) => toAddress(data.slice(at, at + 32)),
    u64: (at: number) => view.getBigUint64(at, true),
    i64: (at: number) => view.getBigInt64(at, true),
    u16: (at: number) => view.getUint16(at, true),
  };
}

export function decodeConfig(data: Uint8Array): EscrowConfig {
  const r = reader(data, Tag.config, CONFIG_SIZE, "config");
  return {
    workerShareBps: r.u16(6),
    stakedWorkerShareBps: r.u16(8),
    serviceAuthority: r.key(16),
    treasury: r.key(48),
    usdcMint: r.key(80),
    stakeMint: r.key(112),
    escrowPool: r.key(144),
    stakePool: r.key(176),
    vaultAuthority: r.key(208),
    minActiveStake: r.u64(240),
    jobTimeoutSeconds: r.i64(248),
    disputeWindowSeconds: r.i64(256),
    unstakeCooldownSeconds: r.i64(264),
  };
}

export function decodeEscrow(data: Uint8Array): JobEscrow {
  const r = reader(data, Tag.escrow, ESCROW_SIZE, "escrow");
  return {
    status: statusOf(data[1]!),
    tier: data[3]!,
    jobId: new TextDecoder().decode(data.subarray(8, 8 + data[4]!)),
    workerStaked: data[5] === 1,
    wallet: r.key(40),
    vault: r.key(72),
    worker: r.key(104),
    proofHash: data.slice(136, 168),
    amountLocked: r.u64(168),
    lockedAt: r.i64(176),
    charge: r.u64(184),
    workerPaid: r.u64(192),
    treasuryPaid: r.u64(200),
    returned: r.u64(208),
    closedAt: r.i64(216),
  };
}

export function decodeStake(data: Uint8Array): WorkerStake {
  const r = reader(data, Tag.stake, STAKE_SIZE, "stake");
  return {
    worker: r.key(8),
    slashed: data[1] === 1,
    active: r.u64(40),
    unstaking: r.u64(48),
    unstakeRequestedAt: r.i64(56),
    slashedTotal: r.u64(64),
    lastSlashedAt: r.i64(72),
  };
}

/** One job's slot of an escrow table. */
export interface TableSlot {
  status: EscrowStatusName;
  /** Locked while `locked`; the charge once settled, disputed or reversed; what went back once refunded. */
  amount: bigint;
  /** Chain-clock seconds; the table's opening plus the slot's offset. */
  lockedAt: bigint;
  /** Seconds after the table opened at which the slot was settled or refunded (65535: later); 0 while locked. */
  closedAfter: number;
  /** The settling worker held the minimum active stake (its share was the staked one). */
  workerStaked: boolean;
}

export interface EscrowTable {
  tableId: bigint;
  capacity: number;
  wallet: Address;
  vault: Address;
  openedAt: bigint;
  lastClosedAt: bigint;
  /** Slots still locked or disputed. */
  open: number;
  slots: TableSlot[];
}

export function decodeTable(data: Uint8Array): EscrowTable {
  const r = reader(data, Tag.table, TABLE_HEADER_SIZE, "table");
  const capacity = data[2]!, used = data[3]!;
  if (data.length < TABLE_HEADER_SIZE + capacity * SLOT_SIZE) throw new Error("escrow table shorter than its capacity");
  const openedAt = r.i64(80);
  const slots = Array.from({ length: used }, (_, i): TableSlot => {
    const at = TABLE_HEADER_SIZE + i * SLOT_SIZE;
    const status = statusOf(data[at + 8]!);
    return {
      status,
      amount: r.u64(at),
      lockedAt: openedAt + BigInt(data[at + 9]! & 0x7f),
      workerStaked: (data[at + 9]! & 0x80) !== 0,
      closedAfter: r.u16(at + 10),
    };
  });
  return { tableId: r.u64(8), capacity, wallet: r.key(16), vault: r.key(48), openedAt, lastClosedAt: r.i64(88), open: data[4]!, slots };
}

function statusOf(code: number): EscrowStatusName {
  const status = (Object.keys(EscrowStatus) as EscrowStatusName[]).find((k) => EscrowStatus[k] === code);
  if (!status) throw new Error(`unknown escrow status ${code}`);
  return status;
}

const OUTCOMES = ["open", "upheld", "rejected", "inconclusive"] as const;

export function decodeDispute(data: Uint8Array): JobDispute {
  const r = reader(data, Tag.dispute, DISPUTE_SIZE, "dispute");
  const outcome = OUTCOMES[data[1]!];
  if (!outcome) throw new Error(`unknown dispute outcome ${data[1]}`);
  return { outcome, escrow: r.key(8), slot: data[4] === 1 ? data[3]! : null, callerHash: data.slice(40, 72), openedAt: r.i64(72), resolvedAt: r.i64(80), returned: r.u64(88), bond: r.u64(96) };
}

/**
 * The tier byte a lock records: the service's tiers in price order, from 1, so 0 never names a
 * tier. The program stores the byte without reading it; receipts read it back.
 */
export const TIER_CODES: Readonly<Record<Tier, number>> = { lite: 1, standard: 2, pro: 3, max: 4 };

/** The tier a lock's byte names, or undefined for a byte the service never writes. */
export function tierOfCode(code: number): Tier | undefined {
  return (Object.keys(TIER_CODES) as Tier[]).find((t) => TIER_CODES[t] === code);
}
