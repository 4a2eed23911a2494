/**
 * The program's account layouts, error codes and statuses, mirroring program/src/escrow.h byte
 * for byte (test/program checks the sizes against accounts the program writes).
 */
import type { Address } from "@solana/kit";
import { toAddress } from "../addresses.ts";

export const CONFIG_SIZE = 288;
export const ESCROW_SIZE = 256;
export const STAKE_SIZE = 128;

export const Tag = { config: 1, escrow: 2, stake: 3 } as const;

/** A job escrow's life; `disputed` and `slashed` are reserved for the disputes work. */
export const EscrowStatus = { locked: 1, settled: 2, refunded: 3, disputed: 4, slashed: 5 } as const;
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
  active: bigint;
  unstaking: bigint;
  unstakeRequestedAt: bigint;
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
  const status = (Object.keys(EscrowStatus) as EscrowStatusName[]).find((k) => EscrowStatus[k] === data[1]);
  if (!status) throw new Error(`unknown escrow status ${data[1]}`);
  return {
    status,
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
  return { worker: r.key(8), active: r.u64(40), unstaking: r.u64(48), unstakeRequestedAt: r.i64(56) };
}
