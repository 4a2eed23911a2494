/**
 * The embedded chain: LiteSVM in this process, with a clock, a cluster-like blockhash window, and
 * persistence in a data dir (persistence.ts).
 */
import { createHash, randomBytes } from "node:crypto";
import { Account, FailedTransactionMetadata, LiteSVM, type TransactionMetadata } from "litesvm";
import type { LiteSvm as NativeSvm } from "litesvm/dist/internal.js";
import type { Address } from "@solana/kit";
import { TOKEN_ACCOUNT_SIZE, TOKEN_PROGRAM, addressBytes } from "./addresses.ts";
import {
  ChainTxError,
  type AccountInfo,
  type ChainEvent,
  type EmbeddedChainBackend,
  type RecentBlockhash,
  type SentTransaction,
  type Simulation,
  type SimulationOptions,
  type StoredTransaction,
  type TransactionStatus,
} from "./backend.ts";
import { base58Decode, base58Encode } from "../core/index.ts";
import { escrowProgramImage } from "./escrow-program/index.ts";
import { ChainStore } from "./persistence.ts";
import type { ProgramImage } from "./programs.ts";
import { signatureKey } from "./sigindex.ts";
import { ALREADY_PROCESSED, describeTransactionError } from "./svm-errors.ts";
import { ReadingCache, withMeta } from "./tx-meta.ts";
import type { AirdropRecord, LogRecord, TxRecord } from "./txlog.ts";
import { parseTransaction, type ParsedTransaction } from "./wire.ts";

export interface LiteSvmBackendOptions {
  /** Where chain state lives; undefined keeps everything in memory. */
  dataDir?: string;
  /** Wall-clock length of a slot. */
  slotMs?: number;
  /** Checkpoint after this many log records... */
  checkpointEvery?: number;
  /** ...or this long after the first record since the last checkpoint. */
  checkpointIntervalMs?: number;
  /** Programs deployed at every open; by default the committed escrow program. */
  programs?: readonly ProgramImage[];
  /** The caller holds the data dir's lock (persistence.ts lockChainDir) and releases it after close. */
  lockHeld?: boolean;
  /**
   * Sync each send's log record to the disk before acknowledging it (default true). False: the
   * chain survives the process's crash but not the machine's (txlog.ts, TxLogOptions.sync).
   */
  syncLog?: boolean;
}

/** A cluster accepts a blockhash for 150 slots after the slot that produced it. */
export const BLOCKHASH_VALID_SLOTS = 150n;
/**
 * LiteSVM's own duplicate check. The signature index is what actually answers "already
 * processed" (it survives restarts); this only has to cover the moment between executing a
 * transaction and indexing it, but a wide margin costs little.
 */
const HISTORY_CAPACITY = 10_000n;

function nativeOf(svm: LiteSVM): NativeSvm {
  const inner = (svm as unknown as { inner?: NativeSvm }).inner;
  if (!inner || typeof inner.sendLegacyTransaction !== "function") {
    throw new Error("litesvm internals changed: the embedded chain needs litesvm 1.5's native handle");
  }
  return inner;
}

function isFailure(r: TransactionMetadata | FailedTransactionMetadata): r is FailedTransactionMetadata {
  return r instanceof FailedTransactionMetadata;
}

export class LiteSvmBackend implements EmbeddedChainBackend {
  readonly embedded = true;
  private readonly svm: NativeSvm;
  private slot: bigint;
  /** Random per open, so no blockhash handed out before a restart is ever valid after it. */
  private readonly blockhashSeed = randomBytes(32);
  private readonly blockhashes = new Map<string, bigint>();
  private latest!: RecentBlockhash;
  private readonly inflight = new Map<string, Promise<void>>();
  private readonly timers: NodeJS.Timeout[] = [];
  private failure: Error | null = null;
  /** The checkpoint being written, if any: its I/O runs while sends go on (ChainStore.checkpoint). */
  private checkpointing: Promise<void> | null = null;
  private closed = false;
  private readonly watchers = new Set<(event: ChainEvent) => void>();
  private readonly readings: ReadingCache;

  private constructor(
    svm: NativeSvm,
    private readonly store: ChainStore,
    private readonly options: Required<Omit<LiteSvmBackendOptions, "dataDir" | "programs" | "lockHeld" | "syncLog">>,
  ) {
    this.svm = svm;
    this.readings = new ReadingCache(svm);
    this.slot = store.lastSlot ?? svm.getClock().slot;
  }

  static async open(options: LiteSvmBackendOptions = {}): Promise<LiteSvmBackend> {
    const svm = nativeOf(new LiteSVM().withTransactionHistory(HISTORY_CAPACITY).withBlockhashCheck(false));
    // Every account LiteSVM creates at genesis besides programs and sysvars (its airdrop faucet)
    // belongs in checkpoints too, since airdrops change it.
    const genesis = svm.getProgramAccounts(addressBytes("11111111111111111111111111111111")).map((a) => a.address);
    // Logged transactions had their signatures checked when they first ran; replay skips that
    // (the Ed25519 precompile still runs: it is an instruction, not the signature check).
    svm.setSigverify(false);
    const store = ChainStore.open(options.dataDir, genesis, options.programs ?? [escrowProgramImage()], {
      restore: (accounts, slot) => {
        // A deployed program is loaded from its program data as it is set, so that goes first.
        const ordered = [...accounts.filter((a) => !a.executable), ...accounts.filter((a) => a.executable)];
        for (const a of ordered) svm.setAccount(a.address, new Account(a.lamports, a.data, a.owner, a.executable, a.rentEpoch));
        svm.warpToSlot(slot);
      },
      // LiteSVM deploys through the upgradeable loader with no upgrade authority: the bytes are fixed.
      deploy: (programs) => {
        for (const p of programs) svm.addProgram(addressBytes(p.address), p.bytes);
      },
      replay: (record) => replay(svm, record),
      account: (address) => {
        const a = svm.getAccount(address);
        return a && { lamports: a.lamports(), owner: a.owner(), executable: a.executable(), rentEpoch: a.rentEpoch(), data: a.data() };
      },
    }, { lockHeld: options.lockHeld ?? false, syncLog: options.syncLog ?? true });
    svm.setSigverify(true);
    const backend = new LiteSvmBackend(svm, store, {
      slotMs: options.slotMs ?? 400,
      checkpointEvery: options.checkpointEvery ?? 5_000,
      checkpointIntervalMs: options.checkpointIntervalMs ?? 30_000,
    });
    backend.advanceSlot(backend.slot + 1n);
    backend.startTimers();
    return backend;
  }

  private startTimers(): void {
    const clock = setInterval(() => this.advanceSlot(this.slot + 1n), this.options.slotMs);
    const checkpoint = setInterval(() => this.checkpointIfDirty(), this.options.checkpointIntervalMs);
    for (const t of [clock, checkpoint]) {
      t.unref();
      this.timers.push(t);
    }
  }

  /** One slot passes: the clock moves and a new blockhash joins the window of valid ones. */
  private advanceSlot(slot: bigint): void {
    this.slot = slot;
    const clock = this.svm.getClock();
    clock.slot = slot;
    clock.unixTimestamp = BigInt(Math.floor(Date.now() / 1000));
    this.svm.setClock(clock);
    const slotBytes = Buffer.alloc(8);
    slotBytes.writeBigUInt64LE(slot);
    const bytes = new Uint8Array(createHash("sha256").update(this.blockhashSeed).update(slotBytes).digest());
    this.blockhashes.set(signatureKey(bytes), slot);
    this.blockhashes.delete(this.oldestKey(slot));
    this.latest = { blockhash: base58Encode(bytes), bytes, lastValidBlockHeight: slot + BLOCKHASH_VALID_SLOTS };
    this.emit({ type: "slot", slot });
  }

  watch(watcher: (event: ChainEvent) => void): () => void {
    this.watchers.add(watcher);
    return () => this.watchers.delete(watcher);
  }

  private emit(event: ChainEvent): void {
    for (const watcher of this.watchers) watcher(event);
  }

  private oldestKey(slot: bigint): string {
    for (const [key, s] of this.blockhashes) {
      if (s + BLOCKHASH_VALID_SLOTS < slot) return key;
      break;
    }
    return "";
  }

  private check(): void {
    if (this.closed) throw new Error("chain backend is closed");
    if (this.failure) throw this.failure;
  }

  async latestBlockhash(): Promise<RecentBlockhash> {
    this.check();
    return this.latest;
  }

  async getSlot(): Promise<bigint> {
    this.check();
    return this.slot;
  }

  /** Every slot of the embedded chain has a block. */
  getBlockHeight(): Promise<bigint> {
    return this.getSlot();
  }

  /** Parses a transaction the embedded chain could execute; throws ChainTxError otherwise. */
  private admissible(wire: Uint8Array): ParsedTransaction {
    let tx;
    try {
      tx = parseTransaction(wire);
    } catch (err) {
      throw new ChainTxError(`malformed transaction: ${(err as Error).message}`, {
        signature: "", err: "SanitizeFailure", logs: [], landed: false,
      });
    }
    // Checkpoints save the accounts a transaction's static keys name; a versioned transaction
    // could write accounts from lookup tables that they would miss.
    if (tx.version !== "legacy") {
      throw new ChainTxError("the embedded chain takes legacy transactions only", {
        signature: "", err: "UnsupportedVersion", logs: [], landed: false,
      });
    }
    return tx;
  }

  async sendTransaction(wire: Uint8Array): Promise<SentTransaction> {
    this.check();
    const tx = this.admissible(wire);
    const sigBytes = tx.signatures[0];
    const signature = sigBytes ? base58Encode(sigBytes) : "";
    const key = sigBytes ? signatureKey(sigBytes) : "";
    // From here to execution nothing awaits, so no second copy can slip in between the check and
    // the execution; a copy arriving while the first is being made durable waits for it.
    const pending = this.inflight.get(key);
    if (pending) {
      await pending.catch(() => undefined);
      return this.sendTransaction(wire);
    }
    const earlier = this.store.lookup(key);
    if (earlier?.kind === "tx") return outcome(signature, earlier, true);

    const notLanded = (err: string, logs: string[] = []) =>
      new ChainTxError(`transaction ${signature} failed: ${err}`, { signature, err, logs, landed: false });
    if (!sigBytes) throw notLanded("MissingSignatureForFee");
    if (!this.blockhashValid(tx.blockhash)) throw notLanded("BlockhashNotFound");

    const slot = this.slot;
    const { result, meta } = withMeta(this.svm, tx, this.readings, () => this.svm.sendLegacyTransaction(wire), (r) => (isFailure(r) ? r.meta() : r));
    let record: TxRecord;
    if (isFailure(result)) {
      const err = describeTransactionError(result.err());
      const logs = result.meta().logs();
      if (err === ALREADY_PROCESSED) throw new Error(`LiteSVM executed ${signature} but the index does not know it`);
      // Failures before execution (bad signature, unknown blockhash, no fee) leave no trace.
      if (this.svm.getTransaction(sigBytes) === null) throw notLanded(err, logs);
      record = { kind: "tx", slot, ok: false, err, logs, wire, meta };
    } else {
      record = { kind: "tx", slot, ok: true, logs: result.logs(), wire, meta };
    }
    await this.commit(record, key);
    this.emit({ type: "tx", signature, record });
    return outcome(signature, record, false);
  }

  /** Appends a record of a change already made in memory; resolves once it is on disk. */
  private async commit(record: LogRecord, key?: string): Promise<void> {
    const fail = (err: Error): never => {
      // Memory now holds a change the disk may not: stop rather than acknowledge anything else.
      this.failure = new Error(`chain log write failed: ${err.message}`);
      throw this.failure;
    };
    let durable: Promise<void>;
    try {
      durable = this.store.append(record).catch(fail);
    } catch (err) {
      return fail(err as Error);
    }
    if (key) this.inflight.set(key, durable);
    try {
      await durable;
    } finally {
      if (key) this.inflight.delete(key);
    }
    if (this.store.recordsSinceCheckpoint >= this.options.checkpointEvery) setImmediate(() => this.checkpointIfDirty());
  }

  /** The durable record of a signature, waiting out a send of it still being written. */
  private async settled(key: string): Promise<TxRecord | null> {
    const pending = this.inflight.get(key);
    if (pending) await pending.catch(() => undefined);
    const record = this.store.lookup(key);
    return record?.kind === "tx" ? record : null;
  }

  async getTransactionStatus(signature: string): Promise<TransactionStatus | null> {
    const stored = await this.getTransaction(signature);
    if (!stored) return null;
    return stored.err === undefined ? { slot: stored.slot, ok: stored.ok } : { slot: stored.slot, ok: stored.ok, err: stored.err };
  }

  /** Only this process executes on the embedded chain: what it has not executed was never handed to anyone. */
  async settledStatus(wire: Uint8Array): Promise<TransactionStatus | null> {
    const signature = parseTransaction(wire).signatures[0];
    return signature ? this.getTransactionStatus(base58Encode(signature)) : null;
  }

  async getTransaction(signature: string): Promise<StoredTransaction | null> {
    this.check();
    const record = await this.settled(signatureKey(base58Decode(signature, 64)));
    if (!record) return null;
    const { kind: _, ...rest } = record;
    return { signature, ...rest };
  }

  async getAccounts(addresses: readonly Address[]): Promise<(AccountInfo | null)[]> {
    const accounts: (AccountInfo | null)[] = [];
    for (const address of addresses) accounts.push(await this.getAccount(address));
    return accounts;
  }

  async getAccount(address: Address): Promise<AccountInfo | null> {
    this.check();
    const a = this.svm.getAccount(addressBytes(address));
    if (!a) return null;
    return {
      address,
      lamports: a.lamports(),
      owner: base58Encode(a.owner()) as Address,
      executable: a.executable(),
      data: a.data(),
    };
  }

  async getTokenBalance(tokenAccount: Address): Promise<bigint | null> {
    this.check();
    const a = this.svm.getAccount(addressBytes(tokenAccount));
    if (!a || base58Encode(a.owner()) !== TOKEN_PROGRAM) return null;
    const data = a.data();
    if (data.length !== TOKEN_ACCOUNT_SIZE) return null;
    return Buffer.from(data.buffer, data.byteOffset, data.byteLength).readBigUInt64LE(64);
  }

  async minimumBalanceForRentExemption(space: number): Promise<bigint> {
    this.check();
    return this.svm.minimumBalanceForRentExemption(BigInt(space));
  }

  async requestAirdrop(address: Address, lamports: bigint): Promise<void> {
    this.check();
    const record: LogRecord = { kind: "airdrop", slot: this.slot, address: addressBytes(address), lamports };
    // Forgotten first: a failed airdrop may still have charged its faucet.
    this.readings.forgetReadings();
    airdrop(this.svm, record);
    await this.commit(record);
    this.emit({ type: "airdrop", record });
  }

  /**
   * Executes a transaction against the current state and throws the result away: the JSON-RPC
   * server's preflight and `simulateTransaction`.
   */
  async simulateTransaction(wire: Uint8Array, options: SimulationOptions = {}): Promise<Simulation> {
    this.check();
    const tx = this.admissible(wire);
    const unlanded = (err: string): Simulation => ({ ok: false, err, logs: [], unitsConsumed: 0n });
    const sig = tx.signatures[0];
    if (!sig) return unlanded("MissingSignatureForFee");
    if (this.store.lookup(signatureKey(sig))) return unlanded(ALREADY_PROCESSED);
    if (!options.replaceBlockhash && !this.blockhashValid(tx.blockhash)) return unlanded("BlockhashNotFound");
    const sigVerify = options.sigVerify ?? true;
    if (!sigVerify) this.svm.setSigverify(false);
    try {
      const r = this.svm.simulateLegacyTransaction(wire);
      const failed = r instanceof FailedTransactionMetadata;
      const meta = r.meta();
      const sim: Simulation = { ok: !failed, logs: meta.logs(), unitsConsumed: meta.computeUnitsConsumed() };
      if (failed) sim.err = describeTransactionError(r.err());
      return sim;
    } finally {
      if (!sigVerify) this.svm.setSigverify(true);
    }
  }

  async isBlockhashValid(blockhash: Uint8Array): Promise<boolean> {
    return this.blockhashValid(blockhash);
  }

  private blockhashValid(blockhash: Uint8Array): boolean {
    return this.blockhashes.has(signatureKey(blockhash));
  }

  /** E.g. all token accounts. */
  async programAccounts(program: Address): Promise<AccountInfo[]> {
    this.check();
    return this.svm.getProgramAccounts(addressBytes(program)).map((entry) => {
      const account = entry.account();
      return { address: base58Encode(entry.address) as Address, lamports: account.lamports(), owner: program, executable: account.executable(), data: account.data() };
    });
  }

  async history(): Promise<LogRecord[]> {
    this.check();
    return [...this.store.history()];
  }

  private checkpointIfDirty(): void {
    if (this.closed || this.failure || this.checkpointing || this.store.recordsSinceCheckpoint === 0) return;
    this.checkpointing = this.store.checkpoint(this.slot).then(
      () => {
        this.checkpointing = null;
      },
      (err: Error) => {
        this.checkpointing = null;
        this.failure = new Error(`chain checkpoint failed: ${err.message}`);
      },
    );
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const t of this.timers) clearInterval(t);
    await Promise.allSettled([...this.inflight.values()]);
    await this.checkpointing;
    try {
      if (!this.failure) await this.store.checkpoint(this.slot);
    } finally {
      this.store.close();
    }
  }
}

function outcome(signature: string, record: TxRecord, alreadyProcessed: boolean): SentTransaction {
  if (!record.ok) {
    const err = record.err ?? "unknown error";
    throw new ChainTxError(`transaction ${signature} failed: ${err}`, {
      signature, err, logs: record.logs, landed: true, slot: Number(record.slot),
    });
  }
  return { signature, slot: record.slot, alreadyProcessed };
}

function airdrop(svm: NativeSvm, record: { address: Uint8Array; lamports: bigint }): void {
  // LiteSVM signs airdrops with its own blockhash; a fresh one keeps two equal airdrops distinct.
  svm.expireBlockhash();
  const r = svm.airdrop(record.address, record.lamports);
  if (r && isFailure(r)) throw new Error(`airdrop failed: ${describeTransactionError(r.err())}`);
}

/** Re-executes a logged change and checks it has the outcome it had the first time. */
function replay(svm: NativeSvm, record: LogRecord): void {
  svm.warpToSlot(record.slot);
  if (record.kind === "airdrop") return airdrop(svm, record);
  if (record.meta) {
    // Programs read the clock; the escrow records lock times and lets anyone refund after the timeout.
    const clock = svm.getClock();
    clock.unixTimestamp = BigInt(record.meta.blockTime);
    svm.setClock(clock);
  }
  const r = svm.sendLegacyTransaction(record.wire);
  const err = isFailure(r) ? describeTransactionError(r.err()) : undefined;
  if ((err === undefined) !== record.ok || (err !== undefined && err !== record.err)) {
    throw new Error(`chain replay diverged at slot ${record.slot}: logged ${record.err ?? "ok"}, replayed ${err ?? "ok"}`);
  }
}
