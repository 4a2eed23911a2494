/**
 * The service's chain operations: deposits, escrow locks, settlements with an on-chain proof
 * check, refunds, and workers' stakes in the native token. Each has a `prepareX` that builds and signs without sending (the caller records
 * the signature before the transaction can exist on-chain), `send` for the prepared bytes, and
 * `x` doing both.
 */
import { join } from "node:path";
import type { Address, Instruction } from "@solana/kit";
import { type Logger, MIN_ACTIVE_STAKE, type Signer, TIERS, silentLogger, creditsToBaseUnits, idBody, isId, proofMessage, splitPayout } from "../core/index.ts";
import {
  AssociatedTokenAddresses,
  TOKEN_ACCOUNT_SIZE,
  TOKEN_PROGRAM,
  addressBytes,
  addressWithSeed,
  creditSeed,
  stakeSeed,
  toAddress,
} from "./addresses.ts";
import { ChainTxError, type ChainBackend } from "./backend.ts";
import { decodeInstructions } from "./decode.ts";
import * as ix from "./instructions.ts";
import { LiteSvmBackend } from "./litesvm-backend.ts";
import { ensureOnChainSetup, loadServiceKeys, type ServiceKeys } from "./setup.ts";
import type {
  ChainReceipt,
  ChainStatus,
  ChainTransaction,
  DepositInput,
  LockEscrowInput,
  PreparedTransaction,
  RefundInput,
  SettleInput,
} from "./types.ts";
import { buildTransaction, parseTransaction } from "./wire.ts";

export type {
  ChainReceipt,
  ChainStatus,
  ChainTransaction,
  DepositInput,
  LockEscrowInput,
  PreparedTransaction,
  RefundInput,
  SettleInput,
} from "./types.ts";

const PROOF_HASH = /^sha256:[0-9a-f]{64}$/;
const REFERENCE = /^[\x21-\x7e]{1,64}$/;

function wholeCredits(name: string, value: number, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) throw new RangeError(`${name} must be an integer >= ${min}, got ${value}`);
  return value;
}

function jobIdOf(jobId: string): string {
  if (!isId("job", jobId)) throw new TypeError(`not a job id: ${jobId}`);
  return jobId;
}

/** A Map that forgets its oldest entries past `limit`; what it holds is cheap to recompute. */
class BoundedMap<V> extends Map<string, V> {
  constructor(private readonly limit: number) {
    super();
  }
  override set(key: string, value: V): this {
    if (this.size >= this.limit) this.delete(this.keys().next().value!);
    return super.set(key, value);
  }
}

export class Chain {
  readonly feePayer: Address;
  readonly mint: Address;
  readonly mintAuthority: Address;
  readonly custodyAuthority: Address;
  readonly treasuryOwner: Address;
  /** The protocol treasury's USDC token account. */
  readonly treasuryAddress: Address;
  /** The network's native token, which workers stake. */
  readonly nativeMint: Address;
  private readonly nativeTokenAccounts: AssociatedTokenAddresses;

  private readonly creditAccounts = new BoundedMap<Address>(100_000);
  /** Credit accounts seen on-chain; they are never closed, so an entry never goes stale. */
  private readonly existingCreditAccounts = new BoundedMap<true>(100_000);
  private readonly escrows = new BoundedMap<Address>(100_000);

  constructor(
    /** Where transactions go; the JSON-RPC server reaches the embedded chain through it. */
    readonly backend: ChainBackend,
    private readonly keys: ServiceKeys,
    private readonly tokenAccounts: AssociatedTokenAddresses,
    treasuryAccount: Address,
    /** Rent-exempt minimum of a token account, paid by the fee payer for each account created. */
    private readonly tokenAccountRent: bigint,
  ) {
    this.feePayer = keys.feePayer.address;
    this.mint = keys.mint.address;
    this.mintAuthority = keys.mintAuthority.address;
    this.custodyAuthority = keys.custody.address;
    this.treasuryOwner = keys.treasury.address;
    this.treasuryAddress = treasuryAccount;
    this.nativeMint = keys.nativeMint.address;
    this.nativeTokenAccounts = new AssociatedTokenAddresses(this.nativeMint);
  }

  /** A wallet's credit account: a token account the custody authority owns, at an address derived from the wallet. */
  creditAccountAddress(wallet: string): Address {
    let account = this.creditAccounts.get(wallet);
    if (account === undefined) {
      account = addressWithSeed(this.custodyAuthority, creditSeed(toAddress(wallet)), TOKEN_PROGRAM);
      this.creditAccounts.set(wallet, account);
    }
    return account;
  }

  /** A job's escrow token account, derived from the job id alone. */
  escrowAddressFor(jobId: string): Address {
    let account = this.escrows.get(jobId);
    if (account === undefined) {
      account = addressWithSeed(this.custodyAuthority, idBody(jobIdOf(jobId)), TOKEN_PROGRAM);
      this.escrows.set(jobId, account);
    }
    return account;
  }

  /** The worker's USDC associated token account, where its payouts go. */
  workerTokenAccount(workerAddress: string | Uint8Array): Address {
    return this.tokenAccounts.of(toAddress(workerAddress));
  }

  /** Instructions creating a custody-owned token account of `mint` at `createWithSeed(custody, seed)`. */
  private custodyAccount(account: Address, seed: string, mint: Address = this.mint): Instruction[] {
    return [
      ix.createAccountWithSeed({
        payer: this.feePayer,
        newAccount: account,
        base: this.custodyAuthority,
        seed,
        lamports: this.tokenAccountRent,
        space: TOKEN_ACCOUNT_SIZE,
        owner: TOKEN_PROGRAM,
      }),
      ix.initializeTokenAccount({ account, mint, owner: this.custodyAuthority }),
    ];
  }

  /**
   * The instructions that open a wallet's credit account when the chain does not have it yet;
   * any way of funding it (this dev deposit, a user's own transfer) starts with them.
   */
  private async openCreditAccount(wallet: Address): Promise<Instruction[]> {
    const account = this.creditAccountAddress(wallet);
    if (this.existingCreditAccounts.has(account)) return [];
    if (await this.backend.getAccount(account)) {
      this.existingCreditAccounts.set(account, true);
      return [];
    }
    return this.custodyAccount(account, creditSeed(wallet));
  }

  private async sign(instructions: Instruction[], custodySigns: boolean, extra: Signer[] = []): Promise<PreparedTransaction> {
    const { bytes, lastValidSlot } = await this.backend.latestBlockhash();
    const signers = custodySigns ? [this.keys.custody, ...extra] : extra;
    return { ...buildTransaction(this.keys.feePayer, instructions, bytes, signers), lastValidSlot: Number(lastValidSlot) };
  }

  /** Development funding: mints USDC base units for `credits` into the wallet's credit account. */
  async prepareDeposit(input: DepositInput): Promise<PreparedTransaction> {
    const wallet = toAddress(input.wallet);
    const credits = wholeCredits("credits", input.credits, 1);
    const { reference } = input;
    if (reference !== undefined && !REFERENCE.test(reference)) {
      throw new TypeError("reference must be 1-64 printable characters without spaces");
    }
    const opening = await this.openCreditAccount(wallet);
    return this.sign(
      [
        ...opening,
        ix.mintTo({ mint: this.mint, to: this.creditAccountAddress(wallet), authority: this.mintAuthority, amount: creditsToBaseUnits(credits) }),
        ix.memo(`svc:deposit wallet=${wallet} credits=${credits}${reference === undefined ? "" : ` ref=${reference}`}`),
      ],
      opening.length > 0,
      [this.keys.mintAuthority],
    );
  }

  async deposit(input: DepositInput): Promise<ChainReceipt> {
    return this.send((await this.prepareDeposit(input)).wire);
  }

  /** Creates the job's escrow account and moves the locked credits into it from the wallet's credit account. */
  async prepareLockEscrow(input: LockEscrowInput): Promise<PreparedTransaction & { escrowAddress: Address }> {
    const jobId = jobIdOf(input.jobId);
    if (!Object.hasOwn(TIERS, input.tier)) throw new TypeError(`unknown tier: ${input.tier}`);
    const credits = wholeCredits("credits", input.credits, 1);
    const escrowAddress = this.escrowAddressFor(jobId);
    const prepared = await this.sign(
      [
        ...this.custodyAccount(escrowAddress, idBody(jobId)),
        ix.tokenTransfer({
          from: this.creditAccountAddress(input.wallet),
          to: escrowAddress,
          authority: this.custodyAuthority,
          amount: creditsToBaseUnits(credits),
        }),
        ix.memo(`svc:escrow job=${jobId} tier=${input.tier} credits=${credits}`),
      ],
      true,
    );
    return { ...prepared, escrowAddress };
  }

  async lockEscrow(input: LockEscrowInput): Promise<ChainReceipt & { escrowAddress: Address }> {
    const prepared = await this.prepareLockEscrow(input);
    return { ...(await this.send(prepared.wire)), escrowAddress: prepared.escrowAddress };
  }

  /**
   * Pays the worker its share and the treasury the rest of the charge, returns the unused lock to
   * the wallet and closes the escrow; the first instruction makes the whole transaction fail
   * unless the worker's signature over the proof message is genuine.
   */
  async prepareSettle(input: SettleInput): Promise<PreparedTransaction> {
    const jobId = jobIdOf(input.jobId);
    const lockedCredits = wholeCredits("lockedCredits", input.lockedCredits, 1);
    const chargedCredits = wholeCredits("chargedCredits", input.chargedCredits, 0);
    if (chargedCredits > lockedCredits) throw new RangeError(`chargedCredits ${chargedCredits} exceeds lockedCredits ${lockedCredits}`);
    if (!PROOF_HASH.test(input.proofHash)) throw new TypeError(`proofHash must be sha256:<64 hex>, got ${input.proofHash}`);
    const worker = toAddress(input.workerPublicKey);
    const escrow = this.escrowAddressFor(jobId);
    const share = splitPayout(chargedCredits, input.staked);
    const refund = creditsToBaseUnits(lockedCredits - chargedCredits);
    const workerAccount = share.worker > 0n ? this.tokenAccounts.of(worker) : undefined;
    const custody = this.custodyAuthority;
    const instructions: Instruction[] = [
      ix.ed25519Verify({
        publicKey: addressBytes(worker),
        signature: input.proofSignature,
        message: proofMessage(jobId, input.proofHash),
      }),
    ];
    if (workerAccount) {
      instructions.push(
        ix.createAssociatedTokenIdempotent({ payer: this.feePayer, ata: workerAccount, owner: worker, mint: this.mint }),
        ix.tokenTransfer({ from: escrow, to: workerAccount, authority: custody, amount: share.worker }),
      );
    }
    if (share.treasury > 0n) {
      instructions.push(ix.tokenTransfer({ from: escrow, to: this.treasuryAddress, authority: custody, amount: share.treasury }));
    }
    if (refund > 0n) {
      instructions.push(ix.tokenTransfer({ from: escrow, to: this.creditAccountAddress(input.wallet), authority: custody, amount: refund }));
    }
    instructions.push(
      ix.closeTokenAccount({ account: escrow, destination: this.feePayer, authority: custody }),
      ix.memo(`svc:settle job=${jobId} proof=${input.proofHash}`),
    );
    return this.sign(instructions, true);
  }

  async settle(input: SettleInput): Promise<ChainReceipt> {
    return this.send((await this.prepareSettle(input)).wire);
  }

  /** Returns the whole lock to the wallet's credit account and closes the escrow. */
  async prepareRefund(input: RefundInput): Promise<PreparedTransaction> {
    const jobId = jobIdOf(input.jobId);
    const lockedCredits = wholeCredits("lockedCredits", input.lockedCredits, 1);
    const escrow = this.escrowAddressFor(jobId);
    return this.sign(
      [
        ix.tokenTransfer({
          from: escrow,
          to: this.creditAccountAddress(input.wallet),
          authority: this.custodyAuthority,
          amount: creditsToBaseUnits(lockedCredits),
        }),
        ix.closeTokenAccount({ account: escrow, destination: this.feePayer, authority: this.custodyAuthority }),
        ix.memo(`svc:refund job=${jobId}`),
      ],
      true,
    );
  }

  async refund(input: RefundInput): Promise<ChainReceipt> {
    return this.send((await this.prepareRefund(input)).wire);
  }

  /** A worker's own token account of the native token. */
  nativeTokenAccount(owner: string): Address {
    return this.nativeTokenAccounts.of(toAddress(owner));
  }

  /**
   * A worker's stake: a native-token account at an address derived from the worker, owned by the
   * custody authority, so what is staked can be slashed when a proof turns out fraudulent.
   */
  stakeAccountAddress(worker: string): Address {
    return addressWithSeed(this.custodyAuthority, stakeSeed(toAddress(worker)), TOKEN_PROGRAM);
  }

  /** Native tokens staked by a worker, in base units. */
  async stakeOf(worker: string): Promise<bigint> {
    return this.tokenBalance(this.stakeAccountAddress(worker));
  }

  /** Whether the worker's stake earns it the staked payout share. */
  async isStaked(worker: string): Promise<boolean> {
    return (await this.stakeOf(worker)) >= MIN_ACTIVE_STAKE;
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
        ix.memo(`svc:${memo} owner=${owner} amount=${input.amount}`),
      ],
      false,
      [authority],
    );
    return this.send(prepared.wire);
  }

  /** Moves native tokens from the worker's own account into its stake; the worker signs. */
  async stake(input: { worker: Signer; amount: bigint }): Promise<ChainReceipt> {
    if (input.amount <= 0n) throw new RangeError("a stake must be positive");
    const worker = input.worker.address;
    const stakeAccount = this.stakeAccountAddress(worker);
    const opening = (await this.backend.getAccount(stakeAccount)) ? [] : this.custodyAccount(stakeAccount, stakeSeed(worker), this.nativeMint);
    const prepared = await this.sign(
      [
        ...opening,
        ix.tokenTransfer({ from: this.nativeTokenAccount(worker), to: stakeAccount, authority: worker, amount: input.amount }),
        ix.memo(`svc:stake worker=${worker} amount=${input.amount}`),
      ],
      opening.length > 0,
      [input.worker],
    );
    return this.send(prepared.wire);
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
      instructions: decodeInstructions(tx),
    };
    if (stored.err !== undefined) decoded.err = stored.err;
    return decoded;
  }

  /** Where and how a transaction executed; null if it is not on the chain. */
  async transactionStatus(signature: string): Promise<ChainStatus | null> {
    const status = await this.backend.getTransactionStatus(signature);
    if (!status) return null;
    return status.err === undefined ? { ok: status.ok, slot: Number(status.slot) } : { ok: status.ok, slot: Number(status.slot), err: status.err };
  }

  /**
   * Whether the transaction is on the chain, having succeeded or failed (`transactionStatus`
   * tells which). After a restart of the embedded chain, one that is not can never execute, so
   * the caller may build a new one.
   */
  async isProcessed(signature: string): Promise<boolean> {
    return (await this.backend.getTransactionStatus(signature)) !== null;
  }

  async slot(): Promise<number> {
    return Number(await this.backend.getSlot());
  }

  /** Stops the clock, checkpoints and closes files. */
  close(): Promise<void> {
    return this.backend.close();
  }
}

export interface OpenChainOptions {
  /** The service's data dir: chain state in `<dataDir>/chain`, keys in `<dataDir>/keys`. Undefined: memory only. */
  dataDir?: string;
  /** Another backend (e.g. a cluster over RPC); by default the embedded LiteSVM chain. */
  backend?: ChainBackend;
  /** Length of an embedded-chain slot in ms (default 400). */
  slotMs?: number;
  /** Where setup says what it found and did (the escrow program's id, its config). */
  logger?: Logger;
}

/** Opens the chain and makes sure the service's mint, fee payer, treasury and escrow program config exist on it. */
export async function openChain(options: OpenChainOptions = {}): Promise<Chain> {
  const { dataDir } = options;
  const backend =
    options.backend ??
    (await LiteSvmBackend.open({
      ...(dataDir === undefined ? {} : { dataDir: join(dataDir, "chain") }),
      ...(options.slotMs === undefined ? {} : { slotMs: options.slotMs }),
    }));
  try {
    const keys = await loadServiceKeys(dataDir === undefined ? undefined : join(dataDir, "keys"));
    const tokenAccounts = new AssociatedTokenAddresses(keys.mint.address);
    const { treasuryAccount } = await ensureOnChainSetup(backend, keys, tokenAccounts, options.logger ?? silentLogger());
    const rent = await backend.minimumBalanceForRentExemption(TOKEN_ACCOUNT_SIZE);
    return new Chain(backend, keys, tokenAccounts, treasuryAccount, rent);
  } catch (err) {
    await backend.close();
    throw err;
  }
}
