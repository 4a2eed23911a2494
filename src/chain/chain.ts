/**
 * The service's chain operations, all through the escrow program (program/, docs/program.md):
 * deposits into a wallet's vault, escrow locks, settlements the program pays only against the
 * worker's proof, refunds, and workers' stakes in the native token. Each has a `prepareX` that
 * builds and signs without sending (the caller records the signature before the transaction can
 * exist on-chain), `send` for the prepared bytes, and `x` doing both.
 */
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { AccountRole, type Address, type Instruction } from "@solana/kit";
import {
  type Logger,
  MIN_ACTIVE_STAKE,
  type Signer,
  TIERS,
  silentLogger,
  base58Encode,
  creditsToBaseUnits,
  idBody,
  isId,
  proofMessage,
  settlementMessageOf,
  verifyEd25519,
} from "../core/index.ts";
import { AssociatedTokenAddresses, TOKEN_PROGRAM, addressBytes, addressWithSeed, creditSeed, toAddress } from "./addresses.ts";
import { ChainTxError, isEmbedded, type ChainBackend, type TransactionStatus } from "./backend.ts";
import { decodeInnerInstructions, decodeInstructions } from "./decode.ts";
import {
  ESCROW_PROGRAM,
  TIER_CODES,
  configAddress,
  decodeConfig,
  decodeEscrow,
  decodeStake,
  decodeTable,
  escrowAddress,
  escrowInstructions,
  stakeAddress,
  tableAddress,
  vaultAddress,
  type EscrowConfig,
  type EscrowTable,
  type EscrowRules,
  type JobEscrow,
  type OutcomeName,
  type WorkerStake,
} from "./escrow-program/index.ts";
import * as ix from "./instructions.ts";
import { ThreadedChainBackend } from "./chain-thread.ts";
import { ClusterBackend } from "./cluster/index.ts";
import { ensureOnChainSetup, escrowProgramIn, loadServiceKeys, type ServiceKeys } from "./setup.ts";
import type {
  ChainReceipt,
  ChainStatus,
  ChainTransaction,
  DepositInput,
  LockEscrowInput,
  PreparedTransaction,
  RefundInput,
  SettleInput,
  TableLockInput,
  TableSettlementInput,
  TableSettlementJob,
} from "./types.ts";
import { buildTransaction, parseTransaction } from "./wire.ts";
import { transactionFee } from "./tx-meta.ts";
import { BoundedMap } from "../core/index.ts";

export type {
  ChainReceipt,
  ChainStatus,
  ChainTransaction,
  DepositInput,
  LockEscrowInput,
  PreparedTransaction,
  RefundInput,
  SettleInput,
  TableLockInput,
  TableSettlementInput,
  TableSettlementJob,
} from "./types.ts";

const PROOF_HASH = /^sha256:[0-9a-f]{64}$/;

/**
 * Escrow locks one transaction always has room for: five come to 1,076 bytes of the 1,232 a
 * transaction may take, and 1,120 with a priority fee's instruction; six come to 1,226 without one
 * and do not fit with one.
 */
export const MAX_LOCKS_PER_TRANSACTION = 5;

/**
 * Jobs one lock_batch transaction of the service has room for, and one settle_batch (which also
 * opens the worker's USDC account if missing): with a priority fee's instruction 29 locks come to
 * 1,216 bytes of the 1,232 a transaction may take and 32 settlements to 1,228; without one, 31
 * and 37 fit (test/chain/tables.test.ts sends both at these sizes, with a priority fee).
 */
export const MAX_TABLE_LOCKS_PER_TRANSACTION = 29;
export const MAX_TABLE_SETTLEMENTS_PER_TRANSACTION = 32;

const REFERENCE = /^[\x21-\x7e]{1,64}$/;

function wholeCredits(name: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  return value;
}

/** A settled job's leaf and entry, as its settlement message holds them (and its worker signs them). */
export function settlementLeaf(job: TableSettlementJob) {
  if (!PROOF_HASH.test(job.proofHash)) throw new TypeError(`proofHash must be sha256:<64 hex>, got ${job.proofHash}`);
  return {
    jobId: jobIdOf(job.jobId),
    outputHash: Buffer.from(job.proofHash.slice("sha256:".length), "hex"),
    promptTokens: job.promptTokens,
    completionTokens: job.completionTokens,
    slot: job.slot,
    charge: creditsToBaseUnits(wholeCredits("creditsCharged", job.creditsCharged, 0)),
  };
}

/** A caller's `sha256:<hex>` hash of the text it received, as the 32 bytes a dispute records. */
function callerHashBytes(callerHash: string): Buffer {
  if (!PROOF_HASH.test(callerHash)) throw new TypeError(`callerHash must be sha256:<64 hex>, got ${callerHash}`);
  return Buffer.from(callerHash.slice("sha256:".length), "hex");
}

/** A table's slot index: the program carries it in one byte, so a larger one would name another slot. */
function slotIndex(slot: number): number {
  if (!Number.isInteger(slot) || slot < 0 || slot > 254) throw new RangeError(`a table's slot is 0 to 254, not ${slot}`);
  return slot;
}

function jobIdOf(jobId: string): string {
  if (!isId("job", jobId)) throw new TypeError(`not a job id: ${jobId}`);
  return jobId;
}

/** A backend's status in the chain layer's terms (slot as a number). */
function chainStatus(status: TransactionStatus | null): ChainStatus | null {
  if (!status) return null;
  return status.err === undefined ? { ok: status.ok, slot: Number(status.slot) } : { ok: status.ok, slot: Number(status.slot), err: status.err };
}

/** A signer whose signature slot stays empty: the wallet fills it (`solana:signTransaction`). */
function awaitingSignature(wallet: Address): Signer {
  return { address: wallet, publicKey: addressBytes(wallet), sign: () => new Uint8Array(64) };
}

/**
 * The wallet's signed copy of a transaction the service prepared: accepted only when its message
 * is byte for byte the prepared one, the service's own signatures are untouched and the wallet's
 * signature verifies. Returns the bytes to send.
 */
export function walletSignedCopy(prepared: Uint8Array, signed: Uint8Array, wallet: string): Uint8Array {
  const ours = parseTransaction(prepared);
  const theirs = parseTransaction(signed);
  const messageAt = (wire: Uint8Array, count: number) => wire.subarray(1 + 64 * count);
  const message = messageAt(prepared, ours.signatures.length);
  if (theirs.signatures.length !== ours.signatures.length || !Buffer.from(messageAt(signed, theirs.signatures.length)).equals(message)) {
    throw new TypeError("the signed transaction is not the one the service prepared");
  }
  const slot = ours.accountKeys.findIndex((k) => base58Encode(k) === wallet);
  if (slot < 0 || slot >= ours.signatures.length) throw new TypeError("the wallet does not sign this transaction");
  for (let i = 0; i < ours.signatures.length; i++) {
    if (i !== slot && !Buffer.from(theirs.signatures[i]!).equals(ours.signatures[i]!)) throw new TypeError("the service's signature was changed");
  }
  if (!verifyEd25519(wallet, message, theirs.signatures[slot]!)) throw new TypeError("the wallet's signature does not verify");
  return signed;
}

/** Fills `signer`'s empty signature slot of a prepared transaction: what a wallet's signTransaction does (svc dev's dev wallet, server-side). */
export function signWalletSlot(prepared: Uint8Array, signer: Signer): Uint8Array {
  const parsed = parseTransaction(prepared);
  const slot = parsed.accountKeys.findIndex((k) => base58Encode(k) === signer.address);
  if (slot < 0 || slot >= parsed.signatures.length) throw new TypeError(`${signer.address} does not sign this transaction`);
  const signed = prepared.slice();
  signed.set(signer.sign(prepared.subarray(1 + 64 * parsed.signatures.length)), 1 + 64 * slot);
  return signed;
}

export class Chain {
  readonly feePayer: Address;
  readonly mint: Address;
  readonly mintAuthority: Address;
  /** Signs every lock, settlement and refund: the escrow program's service authority. */
  readonly serviceAuthority: Address;
  readonly treasuryOwner: Address;
  /** The protocol treasury's USDC token account. */
  readonly treasuryAddress: Address;
  /** The network's native token, which workers stake. */
  readonly nativeMint: Address;
  private readonly nativeTokenAccounts: AssociatedTokenAddresses;

  private rules: Promise<EscrowConfig> | undefined;
  /** Vaults seen on-chain; a vault is never closed, so an entry never goes stale. */
  private readonly existingVaults = new BoundedMap<true>(100_000);

  constructor(
    /** Where transactions go; the JSON-RPC server reaches the embedded chain through it. */
    readonly backend: ChainBackend,
    private readonly keys: ServiceKeys,
    private readonly tokenAccounts: AssociatedTokenAddresses,
    treasuryAccount: Address,
    /** Micro-lamports per compute unit offered on each transaction the service signs (0: none). */
    private readonly priorityFeeMicroLamports = 0n,
    /** Where the escrow program lives on this chain: the embedded chain's fixed id, or `svc chain init`'s on a cluster. */
    readonly program: Address = ESCROW_PROGRAM,
  ) {
    this.feePayer = keys.feePayer.address;
    this.mint = keys.mint.address;
    this.mintAuthority = keys.mintAuthority.address;
    this.serviceAuthority = keys.custody.address;
    this.treasuryOwner = keys.treasury.address;
    this.treasuryAddress = treasuryAccount;
    this.nativeMint = keys.nativeMint.address;
    this.nativeTokenAccounts = new AssociatedTokenAddresses(this.nativeMint);
  }

  /**
   * A wallet's credits: its vault in the escrow program, a USDC token account only the program
   * moves, to a job's escrow when the service locks it or to the wallet when the wallet withdraws.
   */
  creditAccountAddress(wallet: string): Address {
    return vaultAddress(toAddress(wallet), this.program).address;
  }

  /** A job's escrow record in the program, derived from the job id alone. */
  escrowAddressFor(jobId: string): Address {
    return escrowAddress(jobIdOf(jobId), this.program).address;
  }

  /** The worker's USDC associated token account, where its payouts go. */
  workerTokenAccount(workerAddress: string | Uint8Array): Address {
    return this.tokenAccounts.of(toAddress(workerAddress));
  }

  /**
   * The instruction that opens a wallet's vault when the chain does not have it yet; any way of
   * funding it (this dev deposit, a wallet's own transfer) starts with it. Anyone may open one.
   */
  async openVault(wallet: Address, payer: Address = this.feePayer): Promise<Instruction[]> {
    const vault = this.creditAccountAddress(wallet);
    if (this.existingVaults.has(vault)) return [];
    if (await this.backend.getAccount(vault)) {
      this.existingVaults.set(vault, true);
      return [];
    }
    return [escrowInstructions.openVault({ program: this.program, payer, wallet, usdcMint: this.mint })];
  }

  /**
   * A transaction the service authority signs is paid by the authority too, rent deposits
   * included (their instructions name it as payer): one signature instead of two. That halves
   * the signature fees of a job's lock and settlement, and the signing and checking of them.
   * Everything else is paid by the fee payer. The one signature is made on the spot: handing it
   * to the thread pool costs a loaded gateway more than it saves.
   */
  private async sign(instructions: Instruction[], authoritySigns: boolean, extra: Signer[] = []): Promise<PreparedTransaction> {
    const { bytes, lastValidBlockHeight } = await this.backend.latestBlockhash();
    const payer = authoritySigns ? this.keys.custody : this.keys.feePayer;
    const priced = ix.withPriorityFee(instructions, this.priorityFeeMicroLamports);
    return { ...buildTransaction(payer, priced, bytes, extra), lastValidBlockHeight: Number(lastValidBlockHeight) };
  }

  /** Development funding: mints USDC base units for `credits` into the wallet's vault. */
  async prepareDeposit(input: DepositInput): Promise<PreparedTransaction> {
    const wallet = toAddress(input.wallet);
    const credits = wholeCredits("credits", input.credits, 1);
    const { reference } = input;
    if (reference !== undefined && !REFERENCE.test(reference)) {
      throw new TypeError("reference must be 1-64 printable characters without spaces");
    }
    return this.sign(
      [
        ...(await this.openVault(wallet)),
        ix.mintTo({ mint: this.mint, to: this.creditAccountAddress(wallet), authority: this.mintAuthority, amount: creditsToBaseUnits(credits) }),
        ix.memo(`svc:deposit wallet=${wallet} credits=${credits}${reference === undefined ? "" : ` ref=${reference}`}`),
      ],
      false,
      [this.keys.mintAuthority],
    );
  }

  async deposit(input: DepositInput): Promise<ChainReceipt> {
    return this.send((await this.prepareDeposit(input)).wire);
  }

  /** The program's `lock`: moves the job's estimate from the wallet's vault into escrow and records wallet, tier, job id and amount. */
  async prepareLockEscrow(input: LockEscrowInput): Promise<PreparedTransaction & { escrowAddress: Address }> {
    const { escrowAddresses, ...prepared } = await this.prepareLockEscrows([input]);
    return { ...prepared, escrowAddress: escrowAddresses[0]! };
  }

  /**
   * Several jobs' locks in one transaction under one signature, at most MAX_LOCKS_PER_TRANSACTION:
   * the program checks each lock against its own accounts, and the transaction executes all of
   * them or none. The chain's work per lock falls to about a third at four to six a transaction
   * (bench/chain.ts).
   */
  async prepareLockEscrows(inputs: readonly LockEscrowInput[]): Promise<PreparedTransaction & { escrowAddresses: Address[] }> {
    if (inputs.length < 1 || inputs.length > MAX_LOCKS_PER_TRANSACTION) {
      throw new RangeError(`a transaction carries 1 to ${MAX_LOCKS_PER_TRANSACTION} escrow locks, not ${inputs.length}`);
    }
    const jobIds = inputs.map((input) => jobIdOf(input.jobId));
    if (new Set(jobIds).size !== jobIds.length) throw new TypeError("a job's escrow is locked once: a job id appears twice");
    const locks = inputs.map((input) => this.lockInstruction(input));
    return { ...(await this.sign(locks, true)), escrowAddresses: jobIds.map((jobId) => this.escrowAddressFor(jobId)) };
  }

  private lockInstruction(input: LockEscrowInput): Instruction {
    if (!Object.hasOwn(TIERS, input.tier)) throw new TypeError(`unknown tier: ${input.tier}`);
    const credits = wholeCredits("credits", input.credits, 1);
    return escrowInstructions.lock({
      program: this.program,
      serviceAuthority: this.serviceAuthority,
      payer: this.serviceAuthority,
      wallet: toAddress(input.wallet),
      jobId: input.jobId,
      tier: TIER_CODES[input.tier],
      amount: creditsToBaseUnits(credits),
    });
  }

  async lockEscrow(input: LockEscrowInput): Promise<ChainReceipt & { escrowAddress: Address }> {
    const prepared = await this.prepareLockEscrow(input);
    return { ...(await this.send(prepared.wire)), escrowAddress: prepared.escrowAddress };
  }

  /**
   * The program's `settle`: pays the worker its share (the program reads the worker's stake) and
   * the treasury the rest of the charge, and returns the unused lock to the vault. The program
   * refuses it unless the first instruction, the Ed25519 precompile, verifies the worker's
   * signature over this job's proof message.
   */
  async prepareSettle(input: SettleInput): Promise<PreparedTransaction> {
    const jobId = jobIdOf(input.jobId);
    const creditsLocked = wholeCredits("creditsLocked", input.creditsLocked, 1);
    const creditsCharged = wholeCredits("creditsCharged", input.creditsCharged, 0);
    if (creditsCharged > creditsLocked) throw new RangeError(`creditsCharged ${creditsCharged} exceeds creditsLocked ${creditsLocked}`);
    if (!PROOF_HASH.test(input.proofHash)) throw new TypeError(`proofHash must be sha256:<64 hex>, got ${input.proofHash}`);
    const worker = toAddress(input.workerPublicKey);
    const workerTokenAccount = this.tokenAccounts.of(worker);
    return this.sign(
      [
        ix.ed25519Verify({ publicKey: addressBytes(worker), signature: input.proofSignature, message: proofMessage(jobId, input.proofHash) }),
        ix.createAssociatedTokenIdempotent({ payer: this.serviceAuthority, ata: workerTokenAccount, owner: worker, mint: this.mint }),
        escrowInstructions.settle({
          program: this.program,
          serviceAuthority: this.serviceAuthority,
          jobId,
          wallet: toAddress(input.wallet),
          worker,
          workerTokenAccount,
          treasury: this.treasuryAddress,
          charge: creditsToBaseUnits(creditsCharged),
          proofHash: Buffer.from(input.proofHash.slice("sha256:".length), "hex"),
        }),
      ],
      true,
    );
  }

  async settle(input: SettleInput): Promise<ChainReceipt> {
    return this.send((await this.prepareSettle(input)).wire);
  }

  /** The program's `refund`, signed by the service authority: the whole lock goes back to the vault. */
  async prepareRefund(input: RefundInput): Promise<PreparedTransaction> {
    const jobId = jobIdOf(input.jobId);
    wholeCredits("creditsLocked", input.creditsLocked, 1);
    return this.sign([escrowInstructions.refund({ program: this.program, jobId, wallet: toAddress(input.wallet), caller: this.serviceAuthority })], true);
  }

  async refund(input: RefundInput): Promise<ChainReceipt> {
    return this.send((await this.prepareRefund(input)).wire);
  }

  /**
   * The program's `dispute`: records the caller's hash of what it received against a settled job,
   * within the dispute window, and holds `bond` (base units) from the wallet's vault until the outcome.
   */
  async prepareDispute(input: { jobId: string; wallet: string; callerHash: string; bond: bigint }): Promise<PreparedTransaction> {
    const jobId = jobIdOf(input.jobId);
    const callerHash = callerHashBytes(input.callerHash);
    const dispute = escrowInstructions.dispute({ program: this.program, serviceAuthority: this.serviceAuthority, payer: this.serviceAuthority, wallet: toAddress(input.wallet), jobId, callerHash, bond: input.bond });
    return this.sign([dispute], true);
  }

  /**
   * The program's `resolve`: records an arbitration's outcome. Upheld or inconclusive, the
   * treasury pays the job's charge back into the wallet's vault, so the treasury's key signs too,
   * and the bond goes back with it; rejected, the bond goes to the treasury.
   */
  async prepareResolve(input: { jobId: string; wallet: string; outcome: OutcomeName }): Promise<PreparedTransaction> {
    const jobId = jobIdOf(input.jobId);
    const resolve = escrowInstructions.resolve({
      program: this.program,
      serviceAuthority: this.serviceAuthority,
      jobId,
      wallet: toAddress(input.wallet),
      treasury: this.treasuryAddress,
      treasuryOwner: this.treasuryOwner,
      outcome: input.outcome,
    });
    return this.sign([resolve], true, input.outcome === "rejected" ? [] : [this.keys.treasury]);
  }

  /** The program's `slash`: moves `amount` of a worker's stake to the treasury owner's native-token account. */
  async prepareSlash(input: { worker: string; amount: bigint }): Promise<PreparedTransaction> {
    if (input.amount <= 0n) throw new RangeError("a slash must be positive");
    const destination = this.nativeTokenAccount(this.treasuryOwner);
    return this.sign(
      [
        ix.createAssociatedTokenIdempotent({ payer: this.serviceAuthority, ata: destination, owner: this.treasuryOwner, mint: this.nativeMint }),
        escrowInstructions.slash({ program: this.program, serviceAuthority: this.serviceAuthority, worker: toAddress(input.worker), destination, treasury: this.treasuryAddress, amount: input.amount }),
      ],
      true,
    );
  }

  /** Everything a worker has in its stake record, active and unstaking: what a slash can reach. */
  async slashableStake(worker: string): Promise<bigint> {
    const record = await this.stakeRecord(worker);
    return record ? record.active + record.unstaking : 0n;
  }

  /**
   * A deposit the wallet signs: USDC from its own token account into its vault, the service's fee
   * payer paying the fee (and the vault's rent when it is opened here). `reference`, a fresh key
   * on the transfer as Solana Pay does, lets anyone find the payment on-chain. The wallet's
   * signature slot is left empty for it to fill.
   */
  async prepareWalletDeposit(input: { wallet: string; credits: number; reference: Address }): Promise<PreparedTransaction> {
    const wallet = toAddress(input.wallet);
    const credits = wholeCredits("credits", input.credits, 1);
    const transfer = ix.tokenTransfer({ from: this.tokenAccounts.of(wallet), to: this.creditAccountAddress(wallet), authority: wallet, amount: creditsToBaseUnits(credits) });
    const tagged = { ...transfer, accounts: [...(transfer.accounts ?? []), { address: input.reference, role: AccountRole.READONLY }] };
    return this.sign([...(await this.openVault(wallet)), tagged, ix.memo(`svc:deposit wallet=${wallet} credits=${credits}`)], false, [awaitingSignature(wallet)]);
  }

  /** A withdrawal the wallet signs: the program pays from its vault to its own USDC account, opened here if missing at the service's cost. */
  async prepareWithdrawal(input: { wallet: string; credits: number }): Promise<PreparedTransaction> {
    const wallet = toAddress(input.wallet);
    const credits = wholeCredits("credits", input.credits, 1);
    const own = this.tokenAccounts.of(wallet);
    return this.sign(
      [
        ix.createAssociatedTokenIdempotent({ payer: this.feePayer, ata: own, owner: wallet, mint: this.mint }),
        escrowInstructions.withdraw({ program: this.program, wallet, destination: own, amount: creditsToBaseUnits(credits) }),
        ix.memo(`svc:withdrawal nonce=${freshNonce()}`),
      ],
      false,
      [awaitingSignature(wallet)],
    );
  }

  /** USDC base units in the owner's own (associated) token account. */
  async walletUsdc(owner: string): Promise<bigint> {
    return this.tokenBalance(this.tokenAccounts.of(toAddress(owner)));
  }

  /**
   * The program's `close_escrow` for each job (up to about 20 fit a transaction): deletes escrow
   * records nothing can change any more, their rent back to the service authority, which paid it.
   */
  async prepareCloseEscrows(jobIds: readonly string[]): Promise<PreparedTransaction> {
    const closes = jobIds.map((id) => escrowInstructions.closeEscrow({ program: this.program, serviceAuthority: this.serviceAuthority, jobId: jobIdOf(id), destination: this.serviceAuthority }));
    return this.sign(closes, true);
  }

  /** A wallet's escrow table `tableId`. */
  tableAddressFor(wallet: string, tableId: bigint): Address {
    return tableAddress(toAddress(wallet), tableId, this.program).address;
  }

  /**
   * The program's `lock_batch`: the jobs' estimates leave the wallet's vault in one transfer and
   * take the next slots of its table `tableId`, in order; the table is created with `capacity`
   * slots when this lock is its first.
   */
  async prepareTableLock(input: TableLockInput): Promise<PreparedTransaction & { tableAddress: Address }> {
    const count = input.jobs.length;
    if (count < 1 || count > MAX_TABLE_LOCKS_PER_TRANSACTION) throw new RangeError(`a transaction carries 1 to ${MAX_TABLE_LOCKS_PER_TRANSACTION} table locks, not ${count}`);
    if (new Set(input.jobs.map((job) => jobIdOf(job.jobId))).size !== count) throw new TypeError("a job's escrow is locked once: a job id appears twice");
    const jobs = input.jobs.map((job) => {
      if (!Object.hasOwn(TIERS, job.tier)) throw new TypeError(`unknown tier: ${job.tier}`);
      return { jobId: job.jobId, tier: TIER_CODES[job.tier], amount: creditsToBaseUnits(wholeCredits("credits", job.credits, 1)) };
    });
    const wallet = toAddress(input.wallet);
    const lock = escrowInstructions.lockBatch({ program: this.program, serviceAuthority: this.serviceAuthority, payer: this.serviceAuthority, wallet, tableId: input.tableId, capacity: input.capacity, firstSlot: input.firstSlot, jobs });
    return { ...(await this.sign([lock], true)), tableAddress: this.tableAddressFor(wallet, input.tableId) };
  }

  /**
   * The program's `settle_batch` for one worker's jobs of one table, behind the worker's one
   * signature of their settlement message, which the precompile verifies and the program pays
   * from. Refuses a signature that does not cover these jobs' leaves and charges, before sending.
   */
  async prepareTableSettlement(input: TableSettlementInput): Promise<PreparedTransaction> {
    const count = input.jobs.length;
    if (count < 1 || count > MAX_TABLE_SETTLEMENTS_PER_TRANSACTION) throw new RangeError(`a transaction settles 1 to ${MAX_TABLE_SETTLEMENTS_PER_TRANSACTION} slots, not ${count}`);
    const worker = toAddress(input.worker);
    const message = settlementMessageOf(addressBytes(this.tableAddressFor(input.wallet, input.tableId)), input.jobs.map(settlementLeaf));
    if (!verifyEd25519(worker, message, input.signature)) throw new TypeError(`worker ${worker}'s signature does not cover this settlement`);
    const workerTokenAccount = this.tokenAccounts.of(worker);
    return this.sign(
      [
        ix.ed25519Verify({ publicKey: addressBytes(worker), signature: input.signature, message }),
        ix.createAssociatedTokenIdempotent({ payer: this.serviceAuthority, ata: workerTokenAccount, owner: worker, mint: this.mint }),
        escrowInstructions.settleBatch({ program: this.program, serviceAuthority: this.serviceAuthority, wallet: toAddress(input.wallet), tableId: input.tableId, worker, workerTokenAccount, treasury: this.treasuryAddress }),
      ],
      true,
    );
  }

  /** The program's `refund_slots`, signed by the service authority: each slot's whole lock goes back to the vault. */
  async prepareSlotRefunds(input: { wallet: string; tableId: bigint; slots: readonly number[] }): Promise<PreparedTransaction> {
    if (input.slots.length < 1 || input.slots.length > 255) throw new RangeError("a refund names 1 to 255 slots");
    return this.sign([escrowInstructions.refundSlots({ program: this.program, wallet: toAddress(input.wallet), tableId: input.tableId, slots: input.slots, caller: this.serviceAuthority })], true);
  }

  /**
   * The program's `dispute_slot`: `dispute` for one settled slot of a wallet's table, within the
   * dispute window after its settlement. Holds `bond` (base units) from the wallet's vault until
   * the outcome and the slot disputed; the table's other slots are untouched.
   */
  async prepareSlotDispute(input: { wallet: string; tableId: bigint; slot: number; callerHash: string; bond: bigint }): Promise<PreparedTransaction> {
    if (input.bond < 0n) throw new RangeError(`a bond cannot be negative, got ${input.bond}`);
    const dispute = escrowInstructions.disputeSlot({
      program: this.program,
      serviceAuthority: this.serviceAuthority,
      payer: this.serviceAuthority,
      wallet: toAddress(input.wallet),
      tableId: input.tableId,
      slot: slotIndex(input.slot),
      callerHash: callerHashBytes(input.callerHash),
      bond: input.bond,
    });
    return this.sign([dispute], true);
  }

  /**
   * The program's `resolve_slot`: `resolve` for a disputed slot. Upheld or inconclusive, the
   * treasury pays the slot's charge back into the wallet's vault (its key signs too) with the bond,
   * and the slot is reversed; rejected, the bond goes to the treasury and the slot is settled again.
   */
  async prepareSlotResolve(input: { wallet: string; tableId: bigint; slot: number; outcome: OutcomeName }): Promise<PreparedTransaction> {
    const resolve = escrowInstructions.resolveSlot({
      program: this.program,
      serviceAuthority: this.serviceAuthority,
      wallet: toAddress(input.wallet),
      tableId: input.tableId,
      slot: slotIndex(input.slot),
      treasury: this.treasuryAddress,
      treasuryOwner: this.treasuryOwner,
      outcome: input.outcome,
    });
    return this.sign([resolve], true, input.outcome === "rejected" ? [] : [this.keys.treasury]);
  }

  /** The program's `close_table` for each table: deletes finished tables past the dispute window, their rent back to the service authority. */
  async prepareTableClosings(tables: readonly { wallet: string; tableId: bigint }[]): Promise<PreparedTransaction> {
    const closes = tables.map((t) => escrowInstructions.closeTable({ program: this.program, serviceAuthority: this.serviceAuthority, wallet: toAddress(t.wallet), tableId: t.tableId, destination: this.serviceAuthority }));
    return this.sign(closes, true);
  }

  /** A wallet's escrow table as the chain holds it, or null before its first lock and after its closing. */
  async tableRecord(wallet: string, tableId: bigint): Promise<EscrowTable | null> {
    return (await this.tableRecords([{ wallet, tableId }]))[0]!;
  }

  /** Several escrow tables in one read, in the order given; null for each not (or no longer) on the chain. */
  async tableRecords(tables: readonly { wallet: string; tableId: bigint }[]): Promise<(EscrowTable | null)[]> {
    const accounts = await this.backend.getAccounts(tables.map((t) => this.tableAddressFor(t.wallet, t.tableId)));
    return accounts.map((account) => (account && account.owner === this.program ? decodeTable(account.data) : null));
  }

  /** The program's dispute window in seconds, as its config says (read once). */
  async disputeWindowSeconds(): Promise<bigint> {
    return (await this.escrowRules()).disputeWindowSeconds;
  }

  /** How long after its lock the program lets anyone refund a job's escrow, as its config says (read once). */
  async jobTimeoutSeconds(): Promise<bigint> {
    return (await this.escrowRules()).jobTimeoutSeconds;
  }

  private escrowRules(): Promise<EscrowConfig> {
    this.rules ??= (async () => {
      const account = await this.backend.getAccount(configAddress(this.program).address);
      if (!account) throw new Error("the escrow program's config is missing");
      return decodeConfig(account.data);
    })();
    return this.rules;
  }

  /** A job's escrow record as the program keeps it; null when the job never locked one. */
  async escrowRecord(jobId: string): Promise<JobEscrow | null> {
    return (await this.escrowRecords([jobId]))[0]!;
  }

  /** Several jobs' escrow records in one read, in the order given. */
  async escrowRecords(jobIds: readonly string[]): Promise<(JobEscrow | null)[]> {
    const accounts = await this.backend.getAccounts(jobIds.map((jobId) => this.escrowAddressFor(jobId)));
    return accounts.map((account) => (account && account.owner === this.program ? decodeEscrow(account.data) : null));
  }

  /**
   * Upgrading a data dir from before the escrow program held credits: the wallet's old credit
   * account (a token account the service's key owned) is emptied into the wallet's vault and
   * closed. Null when the wallet has no such account, so a second start sends nothing.
   */
  async prepareCustodialCreditsMove(wallet: string): Promise<PreparedTransaction | null> {
    const owner = toAddress(wallet);
    const old = addressWithSeed(this.serviceAuthority, creditSeed(owner), TOKEN_PROGRAM);
    const balance = await this.backend.getTokenBalance(old);
    if (balance === null) return null;
    const vault = this.creditAccountAddress(owner);
    return this.sign(
      [
        ...(await this.openVault(owner, this.serviceAuthority)),
        ...(balance > 0n ? [ix.tokenTransfer({ from: old, to: vault, authority: this.serviceAuthority, amount: balance })] : []),
        ix.closeTokenAccount({ account: old, destination: this.serviceAuthority, authority: this.serviceAuthority }),
        ix.memo(`svc:upgrade wallet=${owner} moved=${balance}`),
      ],
      true,
    );
  }

  /**
   * Whether a job escrowed its credits the way the service did before the escrow program: a token
   * account of the service's key that this version cannot settle or refund.
   */
  async hasCustodialEscrow(jobId: string): Promise<boolean> {
    const old = addressWithSeed(this.serviceAuthority, idBody(jobIdOf(jobId)), TOKEN_PROGRAM);
    return (await this.backend.getTokenBalance(old)) !== null;
  }

  /** A worker's own token account of the native token. */
  nativeTokenAccount(owner: string): Address {
    return this.nativeTokenAccounts.of(toAddress(owner));
  }

  /** A worker's stake record in the program: what is staked there can be slashed, and leaves only after a cooldown. */
  stakeAccountAddress(worker: string): Address {
    return stakeAddress(toAddress(worker), this.program).address;
  }

  /** Native tokens actively staked by a worker, in base units (0 with no stake record). */
  async stakeOf(worker: string): Promise<bigint> {
    return (await this.stakeRecord(worker))?.active ?? 0n;
  }

  private async stakeRecord(worker: string): Promise<WorkerStake | null> {
    const account = await this.backend.getAccount(this.stakeAccountAddress(worker));
    if (!account || account.owner !== this.program) return null;
    return decodeStake(account.data);
  }

  /** Whether the worker's stake earns it the staked payout share, by the rule `settle` applies: never again once slashed. */
  async isStaked(worker: string): Promise<boolean> {
    return (await this.stakeBehindWord(worker)) > 0n;
  }

  /**
   * The active stake a worker has to lose while it counts as staked (the rule of isStaked), else
   * 0: what its word weighs when workers' outputs disagree (arbitration).
   */
  async stakeBehindWord(worker: string): Promise<bigint> {
    const record = await this.stakeRecord(worker);
    return record !== null && !record.slashed && record.active >= MIN_ACTIVE_STAKE ? record.active : 0n;
  }

  /** Development faucet: mints native tokens to an owner's own token account. */
  async grantNative(input: { to: string; amount: bigint }): Promise<ChainReceipt> {
    return this.grant(this.nativeTokenAccounts, this.keys.nativeMintAuthority, "grant", input);
  }

  /** Development faucet: mints test USDC base units to an owner's own (associated) token account. */
  async grantUsdc(input: { to: string; amount: bigint }): Promise<ChainReceipt> {
    return this.grant(this.tokenAccounts, this.keys.mintAuthority, "usdc", input);
  }

  private async grant(accounts: AssociatedTokenAddresses, authority: Signer, memo: string, input: { to: string; amount: bigint }): Promise<ChainReceipt> {
    if (input.amount <= 0n) throw new RangeError("a grant must be positive");
    const owner = toAddress(input.to);
    const account = accounts.of(owner);
    const prepared = await this.sign(
      [
        ix.createAssociatedTokenIdempotent({ payer: this.feePayer, ata: account, owner, mint: accounts.mint }),
        ix.mintTo({ mint: accounts.mint, to: account, authority: authority.address, amount: input.amount }),
        ix.memo(`svc:${memo} owner=${owner} amount=${input.amount} nonce=${freshNonce()}`),
      ],
      false,
      [authority],
    );
    return this.send(prepared.wire);
  }

  /** The program's `stake`: moves native tokens from the worker's own account into its stake record; the worker signs. */
  async stake(input: { worker: Signer; amount: bigint }): Promise<ChainReceipt> {
    if (input.amount <= 0n) throw new RangeError("a stake must be positive");
    const worker = input.worker.address;
    const stake = escrowInstructions.stake({ program: this.program, worker, payer: this.feePayer, source: this.nativeTokenAccount(worker), amount: input.amount });
    return this.send((await this.sign([stake], false, [input.worker])).wire);
  }

  /**
   * Sends prepared bytes. Safe to repeat: a transaction that already executed resolves with
   * `alreadyProcessed` and does nothing again. Throws ChainTxError if the transaction fails.
   */
  async send(wire: Uint8Array): Promise<ChainReceipt> {
    const sent = await this.backend.sendTransaction(wire);
    return { signature: sent.signature, slot: Number(sent.slot), alreadyProcessed: sent.alreadyProcessed };
  }

  /**
   * Lamports a landed transaction paid in fees. A cluster's own record of it (its meta's fee) when
   * the node has it; else, and always on the embedded chain, whose record holds exactly this
   * (tx-meta.ts), what its bytes ask: signatures x 5,000 plus its priority fee (transactionFee).
   */
  async feePaid(signature: string, wire: Uint8Array): Promise<bigint> {
    const meta = isEmbedded(this.backend) ? undefined : (await this.backend.getTransaction(signature).catch(() => null))?.meta;
    return meta ? BigInt(meta.fee) : transactionFee(parseTransaction(wire));
  }

  /**
   * Whether `error` (from `send` or an operation) is the chain refusing the transaction, as
   * opposed to the chain being unreachable. A refused transaction moved nothing.
   */
  isRejection(error: unknown): error is ChainTxError {
    return error instanceof ChainTxError;
  }

  /** Base units in a token account; 0 when the account does not exist (e.g. a closed escrow). */
  async tokenBalance(address: string): Promise<bigint> {
    return (await this.backend.getTokenBalance(toAddress(address))) ?? 0n;
  }

  async creditBalance(wallet: string): Promise<bigint> {
    return this.tokenBalance(this.creditAccountAddress(wallet));
  }

  async accountExists(address: string): Promise<boolean> {
    return (await this.backend.getAccount(toAddress(address))) !== null;
  }

  /** A transaction as the chain recorded it, with its instructions decoded. Throws if it is not on the chain. */
  async readTransaction(signature: string): Promise<ChainTransaction> {
    const stored = await this.backend.getTransaction(signature);
    if (!stored) throw new Error(`transaction ${signature} is not on the chain`);
    const tx = parseTransaction(stored.wire);
    const decoded: ChainTransaction = {
      signature,
      slot: Number(stored.slot),
      ok: stored.ok,
      feePayer: toAddress(tx.accountKeys[0]!),
      logs: stored.logs,
      instructions: decodeInstructions(tx, this.program),
      innerInstructions: decodeInnerInstructions(tx, stored.meta, this.program),
    };
    if (stored.err !== undefined) decoded.err = stored.err;
    return decoded;
  }

  /** Where and how a transaction executed; null if it is not on the chain. */
  async transactionStatus(signature: string): Promise<ChainStatus | null> {
    return chainStatus(await this.backend.getTransactionStatus(signature));
  }

  /**
   * Whether the transaction is on the chain, having succeeded or failed (`transactionStatus`
   * tells which). After a restart of the embedded chain, one that is not can never execute, so
   * the caller may build a new one.
   */
  async isProcessed(signature: string): Promise<boolean> {
    return (await this.backend.getTransactionStatus(signature)) !== null;
  }

  /** The status of a transaction this service may have sent before, once it can no longer change (ChainBackend.settledStatus). */
  async settledStatus(wire: Uint8Array): Promise<ChainStatus | null> {
    return chainStatus(await this.backend.settledStatus(wire));
  }

  async slot(): Promise<number> {
    return Number(await this.backend.getSlot());
  }

  /** Compared with a prepared transaction's `lastValidBlockHeight` to know it can no longer land. */
  async blockHeight(): Promise<number> {
    return Number(await this.backend.getBlockHeight());
  }

  /** Stops the clock, checkpoints and closes files. */
  close(): Promise<void> {
    return this.backend.close();
  }
}

export interface OpenChainOptions {
  /** The service's data dir: chain state in `<dataDir>/chain`, keys in `<dataDir>/keys`. Undefined: memory only. */
  dataDir?: string;
  /** Another backend; by default the embedded LiteSVM chain, or a cluster when `chainUrl` is given. */
  backend?: ChainBackend;
  /** A Solana cluster's JSON-RPC address (devnet, a validator, `svc chain serve`) instead of the embedded chain. */
  chainUrl?: string;
  /** The service's keys (default `<dataDir>/keys`); a shared chain needs every gateway to hold the same ones. */
  keysDir?: string;
  /** A priority fee on every transaction the service signs, in micro-lamports per compute unit: for a busy cluster. */
  priorityFeeMicroLamports?: bigint;
  /** Length of an embedded-chain slot in ms (default 400). */
  slotMs?: number;
  /** Whether the embedded chain syncs its log to the disk before acknowledging a send (default true; LiteSvmBackendOptions.syncLog). */
  syncLog?: boolean;
  /** Where setup says what it found and did (the escrow program's id, its config). */
  logger?: Logger;
  /** The escrow program's rules for a new chain (tests shorten the job timeout); DEFAULT_RULES otherwise. */
  escrowRules?: Partial<EscrowRules>;
  /**
   * Where the escrow program lives. By default the embedded chain's fixed ESCROW_PROGRAM; on a
   * cluster, the key `svc chain init` deployed it at (`<keys dir>/escrow-program.json`) when the
   * keys dir has one, else ESCROW_PROGRAM (where `svc chain serve` preloads it).
   */
  programId?: Address;
}

/** The escrow program's id for these options (OpenChainOptions.programId). */
async function programIdFor(options: OpenChainOptions, backend: ChainBackend, keysDir: string | undefined): Promise<Address> {
  if (options.programId !== undefined) return options.programId;
  if (isEmbedded(backend)) return ESCROW_PROGRAM;
  return (await escrowProgramIn(keysDir)) ?? ESCROW_PROGRAM;
}

/** Opens the chain and makes sure the service's mint, fee payer, treasury and escrow program config exist on it. */
/**
 * Keeps two equal payments apart: with the same instructions and blockhash they would be one
 * transaction (signatures are deterministic), which the chain runs once.
 */
function freshNonce(): string {
  return base58Encode(randomBytes(8));
}

export async function openChain(options: OpenChainOptions = {}): Promise<Chain> {
  const { dataDir } = options;
  const keysDir = options.keysDir ?? (dataDir === undefined ? undefined : join(dataDir, "keys"));
  if (options.chainUrl !== undefined && keysDir === undefined) {
    throw new Error("a cluster's service keys must be kept: give a keys dir (--keys-dir, or the data dir of `svc chain serve`'s keys)");
  }
  const backend = options.backend ?? (options.chainUrl !== undefined ? new ClusterBackend({ url: options.chainUrl }) : await openEmbedded(options));
  try {
    const keys = await loadServiceKeys(keysDir);
    const tokenAccounts = new AssociatedTokenAddresses(keys.mint.address);
    const program = await programIdFor(options, backend, keysDir);
    const fee = options.priorityFeeMicroLamports;
    const setup = { program, ...(fee === undefined ? {} : { priorityFeeMicroLamports: fee }) };
    const { treasuryAccount } = await ensureOnChainSetup(backend, keys, tokenAccounts, options.logger ?? silentLogger(), options.escrowRules, setup);
    return new Chain(backend, keys, tokenAccounts, treasuryAccount, fee, program);
  } catch (err) {
    await backend.close();
    throw err;
  }
}

function openEmbedded({ dataDir, slotMs, syncLog }: OpenChainOptions): Promise<ThreadedChainBackend> {
  return ThreadedChainBackend.open({
    ...(dataDir === undefined ? {} : { dataDir: join(dataDir, "chain") }),
    ...(slotMs === undefined ? {} : { slotMs }),
    ...(syncLog === undefined ? {} : { syncLog }),
  });
}
