/**
 * Builders of the escrow program's instructions as kit `Instruction` values. Account order and
 * data layout match program/src (each handler's comment); the program checks every account, so a
 * builder only saves callers from deriving the addresses themselves.
 */
import { AccountRole, type Address, type Instruction } from "@solana/kit";
import { DISPUTE_WINDOW_MS, JOB_TIMEOUT_MS, MIN_ACTIVE_STAKE, STAKED_WORKER_SHARE_BPS, WORKER_SHARE_BPS } from "../../core/index.ts";
import { SYSTEM_PROGRAM, TOKEN_PROGRAM, addressBytes } from "../addresses.ts";
import { jobKey } from "../../core/index.ts";
import {
  ESCROW_PROGRAM,
  INSTRUCTIONS_SYSVAR,
  configAddress,
  disputeAddress,
  escrowAddress,
  slotDisputeAddress,
  escrowPoolAddress,
  programDataAddress,
  stakeAddress,
  stakePoolAddress,
  tableAddress,
  vaultAddress,
  vaultAuthorityAddress,
} from "./addresses.ts";

const { READONLY, WRITABLE, READONLY_SIGNER, WRITABLE_SIGNER } = AccountRole;

export const Op = {
  initialize: 0,
  openVault: 1,
  withdraw: 2,
  lock: 3,
  settle: 4,
  refund: 5,
  stake: 6,
  requestUnstake: 7,
  withdrawStake: 8,
  dispute: 9,
  resolve: 10,
  slash: 11,
  closeEscrow: 12,
  lockBatch: 13,
  settleBatch: 14,
  refundSlots: 15,
  closeTable: 16,
  disputeSlot: 17,
  resolveSlot: 18,
} as const;

/** How an arbitration ended, as `resolve` records it. */
export const Outcome = { upheld: 1, rejected: 2, inconclusive: 3 } as const;
export type OutcomeName = keyof typeof Outcome;

/** The rules `initialize` fixes; the defaults are the service's (src/core/payout.ts). */
export interface EscrowRules {
  minActiveStake: bigint;
  jobTimeoutSeconds: bigint;
  disputeWindowSeconds: bigint;
  /** Must exceed the dispute window plus the 72 h arbitration window. */
  unstakeCooldownSeconds: bigint;
  workerShareBps: number;
  stakedWorkerShareBps: number;
}

/** The service's rules: the payout split of src/core/payout.ts and the job clocks of src/core/job-clocks.ts. */
export const DEFAULT_RULES: EscrowRules = {
  minActiveStake: MIN_ACTIVE_STAKE,
  jobTimeoutSeconds: BigInt(JOB_TIMEOUT_MS / 1000),
  disputeWindowSeconds: BigInt(DISPUTE_WINDOW_MS / 1000),
  unstakeCooldownSeconds: 4n * 24n * 3600n, // outlasts 60 s of dispute window + 72 h of arbitration
  workerShareBps: Number(WORKER_SHARE_BPS),
  stakedWorkerShareBps: Number(STAKED_WORKER_SHARE_BPS),
};

/** Little-endian instruction data, written field by field. */
class Data {
  private readonly parts: number[] = [];
  constructor(op: number) {
    this.parts.push(op);
  }
  u8(v: number): this {
    this.parts.push(v & 0xff);
    return this;
  }
  u16(v: number): this {
    return this.u8(v).u8(v >> 8);
  }
  u64(v: bigint): this {
    const b = new Uint8Array(8);
    new DataView(b.buffer).setBigUint64(0, BigInt.asUintN(64, v), true);
    return this.bytes(b);
  }
  bytes(b: Uint8Array): this {
    for (const x of b) this.parts.push(x);
    return this;
  }
  done(): Uint8Array {
    return Uint8Array.from(this.parts);
  }
}

const ix = (accounts: [Address, AccountRole][], data: Uint8Array, program = ESCROW_PROGRAM): Instruction => ({
  programAddress: program,
  accounts: accounts.map(([address, role]) => ({ address, role })),
  data,
});

export function initialize(a: {
  serviceAuthority: Address;
  payer: Address;
  treasury: Address;
  usdcMint: Address;
  stakeMint: Address;
  rules: EscrowRules;
  /** The program's upgrade authority, which must sign unless the program has none. */
  upgradeAuthority?: Address;
  program?: Address;
}): Instruction {
  const r = a.rules;
  const program = a.program ?? ESCROW_PROGRAM;
  const extra: [Address, AccountRole][] =
    a.upgradeAuthority && a.upgradeAuthority !== a.serviceAuthority && a.upgradeAuthority !== a.payer
      ? [[a.upgradeAuthority, READONLY_SIGNER]]
      : [];
  const data = new Data(Op.initialize)
    .u64(r.minActiveStake).u64(r.jobTimeoutSeconds).u64(r.disputeWindowSeconds).u64(r.unstakeCooldownSeconds)
    .u16(r.workerShareBps).u16(r.stakedWorkerShareBps).done();
  return ix([
    [configAddress(a.program).address, WRITABLE],
    [a.serviceAuthority, READONLY_SIGNER],
    [a.payer, WRITABLE_SIGNER],
    [a.treasury, READONLY],
    [a.usdcMint, READONLY],
    [a.stakeMint, READONLY],
    [escrowPoolAddress(a.program).address, WRITABLE],
    [stakePoolAddress(a.program).address, WRITABLE],
    [vaultAuthorityAddress(a.program).address, READONLY],
    [TOKEN_PROGRAM, READONLY],
    [SYSTEM_PROGRAM, READONLY],
    [program, READONLY],
    [programDataAddress(program).address, READONLY],
    ...extra,
  ], data, a.program);
}

export function openVault(a: { payer: Address; wallet: Address; usdcMint: Address; program?: Address }): Instruction {
  return ix([
    [configAddress(a.program).address, READONLY],
    [a.payer, WRITABLE_SIGNER],
    [vaultAddress(a.wallet, a.program).address, WRITABLE],
    [a.usdcMint, READONLY],
    [vaultAuthorityAddress(a.program).address, READONLY],
    [TOKEN_PROGRAM, READONLY],
    [SYSTEM_PROGRAM, READONLY],
  ], new Data(Op.openVault).bytes(addressBytes(a.wallet)).done(), a.program);
}

/** Pays `amount` from the wallet's vault to `destination`, a token account the wallet owns. */
export function withdraw(a: { wallet: Address; destination: Address; amount: bigint; program?: Address }): Instruction {
  const vault = vaultAddress(a.wallet, a.program);
  return ix([
    [configAddress(a.program).address, READONLY],
    [a.wallet, READONLY_SIGNER],
    [vault.address, WRITABLE],
    [a.destination, WRITABLE],
    [vaultAuthorityAddress(a.program).address, READONLY],
    [TOKEN_PROGRAM, READONLY],
  ], new Data(Op.withdraw).u64(a.amount).u8(vault.bump).done(), a.program);
}

export function lock(a: {
  serviceAuthority: Address;
  payer: Address;
  wallet: Address;
  jobId: string;
  tier: number;
  amount: bigint;
  program?: Address;
}): Instruction {
  const vault = vaultAddress(a.wallet, a.program);
  const jobId = new TextEncoder().encode(a.jobId);
  const data = new Data(Op.lock).bytes(addressBytes(a.wallet)).u64(a.amount).u8(a.tier).u8(vault.bump)
    .u8(jobId.length).bytes(jobId).done();
  return ix([
    [configAddress(a.program).address, READONLY],
    [a.serviceAuthority, READONLY_SIGNER],
    [a.payer, WRITABLE_SIGNER],
    [escrowAddress(a.jobId, a.program).address, WRITABLE],
    [vault.address, WRITABLE],
    [escrowPoolAddress(a.program).address, WRITABLE],
    [vaultAuthorityAddress(a.program).address, READONLY],
    [TOKEN_PROGRAM, READONLY],
    [SYSTEM_PROGRAM, READONLY],
  ], data, a.program);
}

/**
 * Settles a job. The same transaction must carry the Ed25519 precompile instruction over the
 * worker's signature of `<job id>:sha256:<hex of proofHash>` (src/chain/instructions.ts builds it).
 */
export function settle(a: {
  serviceAuthority: Address;
  jobId: string;
  wallet: Address;
  worker: Address;
  workerTokenAccount: Address;
  treasury: Address;
  charge: bigint;
  proofHash: Uint8Array;
  program?: Address;
}): Instruction {
  if (a.proofHash.length !== 32) throw new TypeError("a proof hash is 32 bytes");
  const data = new Data(Op.settle).u64(a.charge).bytes(addressBytes(a.worker)).bytes(a.proofHash).done();
  return ix(settlementAccounts(escrowAddress(a.jobId, a.program).address, a), data, a.program);
}

/** What `settle` and `settle_batch` pay from and to: the job's escrow record or its table first. */
function settlementAccounts(
  record: Address,
  a: { serviceAuthority: Address; wallet: Address; worker: Address; workerTokenAccount: Address; treasury: Address; program?: Address },
): [Address, AccountRole][] {
  return [
    [configAddress(a.program).address, READONLY],
    [a.serviceAuthority, READONLY_SIGNER],
    [record, WRITABLE],
    [escrowPoolAddress(a.program).address, WRITABLE],
    [vaultAddress(a.wallet, a.program).address, WRITABLE],
    [a.workerTokenAccount, WRITABLE],
    [a.treasury, WRITABLE],
    [stakeAddress(a.worker, a.program).address, READONLY],
    [vaultAuthorityAddress(a.program).address, READONLY],
    [INSTRUCTIONS_SYSVAR, READONLY],
    [TOKEN_PROGRAM, READONLY],
  ];
}

/**
 * Returns a job's whole lock to its vault. `caller` signs: the service authority at any time,
 * anyone else once the job is older than the timeout.
 */
export function refund(a: { jobId: string; wallet: Address; caller: Address; program?: Address }): Instruction {
  return ix([
    [configAddress(a.program).address, READONLY],
    [escrowAddress(a.jobId, a.program).address, WRITABLE],
    [escrowPoolAddress(a.program).address, WRITABLE],
    [vaultAddress(a.wallet, a.program).address, WRITABLE],
    [vaultAuthorityAddress(a.program).address, READONLY],
    [TOKEN_PROGRAM, READONLY],
    [a.caller, READONLY_SIGNER],
  ], new Data(Op.refund).done(), a.program);
}

/** Moves `amount` of the stake mint from the worker's `source` account into its stake. */
export function stake(a: { worker: Address; payer: Address; source: Address; amount: bigint; program?: Address }): Instruction {
  return ix([
    [configAddress(a.program).address, READONLY],
    [a.worker, READONLY_SIGNER],
    [a.payer, WRITABLE_SIGNER],
    [stakeAddress(a.worker, a.program).address, WRITABLE],
    [a.source, WRITABLE],
    [stakePoolAddress(a.program).address, WRITABLE],
    [TOKEN_PROGRAM, READONLY],
    [SYSTEM_PROGRAM, READONLY],
  ], new Data(Op.stake).u64(a.amount).done(), a.program);
}

export function requestUnstake(a: { worker: Address; amount: bigint; program?: Address }): Instruction {
  return ix([
    [configAddress(a.program).address, READONLY],
    [a.worker, READONLY_SIGNER],
    [stakeAddress(a.worker, a.program).address, WRITABLE],
  ], new Data(Op.requestUnstake).u64(a.amount).done(), a.program);
}

/** Pays out everything requested for unstaking once the cooldown has passed. */
export function withdrawStake(a: { worker: Address; destination: Address; program?: Address }): Instruction {
  return ix([
    [configAddress(a.program).address, READONLY],
    [a.worker, READONLY_SIGNER],
    [stakeAddress(a.worker, a.program).address, WRITABLE],
    [a.destination, WRITABLE],
    [stakePoolAddress(a.program).address, WRITABLE],
    [vaultAuthorityAddress(a.program).address, READONLY],
    [TOKEN_PROGRAM, READONLY],
  ], new Data(Op.withdrawStake).done(), a.program);
}

/**
 * Records a caller's dispute of a settled job, within the dispute window; `callerHash` is the
 * SHA-256 of the text the caller received. The program moves `bond` from the wallet's vault into
 * the pool until the outcome.
 */
export function dispute(a: { serviceAuthority: Address; payer: Address; wallet: Address; jobId: string; callerHash: Uint8Array; bond: bigint; program?: Address }): Instruction {
  if (a.callerHash.length !== 32) throw new TypeError("a caller's hash is 32 bytes");
  const accounts = disputeAccounts(escrowAddress(a.jobId, a.program).address, disputeAddress(a.jobId, a.program).address, a);
  return ix(accounts, new Data(Op.dispute).bytes(a.callerHash).u64(a.bond).done(), a.program);
}

/** What `dispute` and `dispute_slot` hold the bond with: the job's escrow record or its table, and the dispute record. */
function disputeAccounts(record: Address, dispute: Address, a: { serviceAuthority: Address; payer: Address; wallet: Address; program?: Address }): [Address, AccountRole][] {
  return [
    [configAddress(a.program).address, READONLY],
    [a.serviceAuthority, READONLY_SIGNER],
    [a.payer, WRITABLE_SIGNER],
    [record, WRITABLE],
    [dispute, WRITABLE],
    [SYSTEM_PROGRAM, READONLY],
    [vaultAddress(a.wallet, a.program).address, WRITABLE],
    [escrowPoolAddress(a.program).address, WRITABLE],
    [vaultAuthorityAddress(a.program).address, READONLY],
    [TOKEN_PROGRAM, READONLY],
  ];
}

/**
 * Records an arbitration's outcome. Upheld or inconclusive, the treasury pays the job's charge
 * back into the wallet's vault, so `treasuryOwner` signs, and the bond goes back to the vault;
 * rejected, the bond goes to the treasury.
 */
export function resolve(a: {
  serviceAuthority: Address;
  jobId: string;
  wallet: Address;
  treasury: Address;
  treasuryOwner: Address;
  outcome: OutcomeName;
  program?: Address;
}): Instruction {
  const accounts = resolutionAccounts(escrowAddress(a.jobId, a.program).address, disputeAddress(a.jobId, a.program).address, a);
  return ix(accounts, new Data(Op.resolve).u8(Outcome[a.outcome]).done(), a.program);
}

/** What `resolve` and `resolve_slot` pay with: the job's escrow record or its table, and the dispute record. */
function resolutionAccounts(
  record: Address,
  dispute: Address,
  a: { serviceAuthority: Address; wallet: Address; treasury: Address; treasuryOwner: Address; outcome: OutcomeName; program?: Address },
): [Address, AccountRole][] {
  return [
    [configAddress(a.program).address, READONLY],
    [a.serviceAuthority, READONLY_SIGNER],
    [record, WRITABLE],
    [dispute, WRITABLE],
    [a.treasury, WRITABLE],
    [a.treasuryOwner, a.outcome === "rejected" ? READONLY : READONLY_SIGNER],
    [vaultAddress(a.wallet, a.program).address, WRITABLE],
    [TOKEN_PROGRAM, READONLY],
    [escrowPoolAddress(a.program).address, WRITABLE],
    [vaultAuthorityAddress(a.program).address, READONLY],
  ];
}

/** Moves `amount` of a worker's stake (active first) to `destination`, the treasury owner's stake-token account. */
export function slash(a: { serviceAuthority: Address; worker: Address; destination: Address; treasury: Address; amount: bigint; program?: Address }): Instruction {
  return ix([
    [configAddress(a.program).address, READONLY],
    [a.serviceAuthority, READONLY_SIGNER],
    [stakeAddress(a.worker, a.program).address, WRITABLE],
    [stakePoolAddress(a.program).address, WRITABLE],
    [a.destination, WRITABLE],
    [a.treasury, READONLY],
    [vaultAuthorityAddress(a.program).address, READONLY],
    [TOKEN_PROGRAM, READONLY],
  ], new Data(Op.slash).u64(a.amount).done(), a.program);
}

/** Deletes a closed job escrow whose dispute window has passed; its rent goes to `destination`. */
export function closeEscrow(a: { serviceAuthority: Address; jobId: string; destination: Address; program?: Address }): Instruction {
  return ix([
    [configAddress(a.program).address, READONLY],
    [a.serviceAuthority, READONLY_SIGNER],
    [escrowAddress(a.jobId, a.program).address, WRITABLE],
    [a.destination, WRITABLE],
  ], new Data(Op.closeEscrow).done(), a.program);
}

/** One job of a lock_batch: its estimate in USDC base units, its tier code and its id (a `job_` id, carried as its 16-byte ULID). */
export interface BatchLock {
  jobId: string;
  tier: number;
  amount: bigint;
}

/**
 * Locks several jobs of one wallet into its escrow table `tableId`, which the instruction creates
 * with room for `capacity` slots when it does not exist yet; the jobs take the slots from
 * `firstSlot` on, in order, and the program refuses the lock unless that is the table's next.
 */
export function lockBatch(a: {
  serviceAuthority: Address;
  payer: Address;
  wallet: Address;
  tableId: bigint;
  capacity: number;
  firstSlot: number;
  jobs: readonly BatchLock[];
  program?: Address;
}): Instruction {
  const vault = vaultAddress(a.wallet, a.program);
  const data = new Data(Op.lockBatch).bytes(addressBytes(a.wallet)).u8(vault.bump).u64(a.tableId).u8(a.capacity).u8(a.firstSlot).u8(a.jobs.length);
  for (const job of a.jobs) data.u64(job.amount).u8(job.tier).bytes(jobKey(job.jobId));
  return ix([
    [configAddress(a.program).address, READONLY],
    [a.serviceAuthority, READONLY_SIGNER],
    [a.payer, WRITABLE_SIGNER],
    [tableAddress(a.wallet, a.tableId, a.program).address, WRITABLE],
    [vault.address, WRITABLE],
    [escrowPoolAddress(a.program).address, WRITABLE],
    [vaultAuthorityAddress(a.program).address, READONLY],
    [TOKEN_PROGRAM, READONLY],
    [SYSTEM_PROGRAM, READONLY],
  ], data.done(), a.program);
}

/**
 * Settles slots of one table for one worker. The same transaction must carry the worker's Ed25519
 * signature of `settlementMessage(table, root, entries)` (src/core/settlement-proof.ts), which
 * names the slots and their charges.
 */
export function settleBatch(a: {
  serviceAuthority: Address;
  wallet: Address;
  tableId: bigint;
  worker: Address;
  workerTokenAccount: Address;
  treasury: Address;
  program?: Address;
}): Instruction {
  const data = new Data(Op.settleBatch).bytes(addressBytes(a.worker)).done();
  return ix(settlementAccounts(tableAddress(a.wallet, a.tableId, a.program).address, a), data, a.program);
}

/**
 * Returns the whole lock of each of `slots` to the table's vault. `caller` signs: the service
 * authority at any time, anyone else for slots locked longer ago than the job timeout.
 */
export function refundSlots(a: { wallet: Address; tableId: bigint; slots: readonly number[]; caller: Address; program?: Address }): Instruction {
  const data = new Data(Op.refundSlots).u8(a.slots.length);
  for (const slot of a.slots) data.u8(slot);
  return ix([
    [configAddress(a.program).address, READONLY],
    [tableAddress(a.wallet, a.tableId, a.program).address, WRITABLE],
    [escrowPoolAddress(a.program).address, WRITABLE],
    [vaultAddress(a.wallet, a.program).address, WRITABLE],
    [vaultAuthorityAddress(a.program).address, READONLY],
    [TOKEN_PROGRAM, READONLY],
    [a.caller, READONLY_SIGNER],
  ], data.done(), a.program);
}

/** Deletes a table whose every slot is final once the dispute window has passed; its rent goes to `destination`. */
export function closeTable(a: { serviceAuthority: Address; wallet: Address; tableId: bigint; destination: Address; program?: Address }): Instruction {
  return ix([
    [configAddress(a.program).address, READONLY],
    [a.serviceAuthority, READONLY_SIGNER],
    [tableAddress(a.wallet, a.tableId, a.program).address, WRITABLE],
    [a.destination, WRITABLE],
  ], new Data(Op.closeTable).done(), a.program);
}

/**
 * Records a caller's dispute of a table's settled slot, within the dispute window after its
 * settlement; the program moves `bond` from the table's vault into the pool until the outcome.
 */
export function disputeSlot(a: { serviceAuthority: Address; payer: Address; wallet: Address; tableId: bigint; slot: number; callerHash: Uint8Array; bond: bigint; program?: Address }): Instruction {
  if (a.callerHash.length !== 32) throw new TypeError("a caller's hash is 32 bytes");
  const table = tableAddress(a.wallet, a.tableId, a.program).address;
  const accounts = disputeAccounts(table, slotDisputeAddress(table, a.slot, a.program).address, a);
  return ix(accounts, new Data(Op.disputeSlot).u8(a.slot).bytes(a.callerHash).u64(a.bond).done(), a.program);
}

/** Records the outcome of a slot's dispute, as `resolve` does for a job escrow. */
export function resolveSlot(a: {
  serviceAuthority: Address;
  wallet: Address;
  tableId: bigint;
  slot: number;
  treasury: Address;
  treasuryOwner: Address;
  outcome: OutcomeName;
  program?: Address;
}): Instruction {
  const table = tableAddress(a.wallet, a.tableId, a.program).address;
  const accounts = resolutionAccounts(table, slotDisputeAddress(table, a.slot, a.program).address, a);
  return ix(accounts, new Data(Op.resolveSlot).u8(a.slot).u8(Outcome[a.outcome]).done(), a.program);
}
