/**
 * Durable state of the embedded chain, in its data dir:
 *
 * - `txlog`: every change, in execution order (txlog.ts). A send is acknowledged only after its
 *   record is fsynced (concurrent sends share one fsync), or, for an unsynced log, written.
 * - `checkpoint`: the accounts the log's records have written, as of a log offset (checkpoint.ts).
 * - `txindex`: signature -> log offset for the records before the checkpoint (sigindex.ts).
 * - `programs`: which bytes of each built-in program this chain ran under (programs.ts).
 * - `LOCK`: the owning process.
 *
 * Opening restores the checkpoint into a fresh LiteSVM and re-executes the log's records after
 * it; each must reproduce its logged outcome, or opening fails rather than run on a diverged
 * chain. Built-in programs are loaded between the two: they are not in the log, and no
 * transaction writes them. Programs deployed by transactions (`svc chain init` through the
 * upgradeable loader) are accounts like any other and are checkpointed with their program data.
 * The log is not truncated at a checkpoint: it is also the transaction history that
 * lookups by signature read, so a checkpoint only moves where replay starts.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { readCheckpoint, writeCheckpoint, type AccountSnapshot } from "./checkpoint.ts";
import { acquireLock } from "./lock.ts";
import { checkProgramNotes, type ProgramImage } from "./programs.ts";
import { SignatureIndex, signatureKey } from "./sigindex.ts";
import { MemoryLog, TxLog, encodeRecord, type LogRecord, type RecordLog } from "./txlog.ts";
import { isWritable, parseTransaction } from "./wire.ts";

export interface StateHooks {
  restore(accounts: AccountSnapshot[], slot: bigint): void;
  /** Loads the built-in programs; runs after the checkpoint is restored, before any replay. */
  deploy(programs: readonly ProgramImage[]): void;
  replay(record: LogRecord): void;
  account(address: Uint8Array): Omit<AccountSnapshot, "address"> | null;
}

/**
 * Makes the chain data dir and takes its lock, so one owner at a time writes it. The chain thread's
 * owner takes it on the main thread: the lock's record of dirs open in this process is per thread.
 */
export function lockChainDir(dir: string): () => void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return acquireLock(join(dir, "LOCK"));
}

/** The accounts a record may have written: its transaction's writable keys, or the airdrop's target. */
function writtenAccounts(record: LogRecord): Uint8Array[] {
  if (record.kind === "airdrop") return [record.address];
  const tx = parseTransaction(record.wire);
  return tx.accountKeys.filter((_, i) => isWritable(tx, i));
}

export class ChainStore {
  /** The slot of the newest durable change, if any: the clock resumes after it. */
  lastSlot: bigint | null = null;
  recordsSinceCheckpoint = 0;
  /**
   * Every account the log's records have written and that still exists, as of the last
   * checkpoint (or of opening), by the latin1 key of its address bytes. A checkpoint reads again
   * only the accounts written since: reading one from LiteSVM costs about 10 µs, and most of a
   * busy node's accounts (escrow records waiting out their dispute window) have not changed.
   */
  private readonly accounts = new Map<string, AccountSnapshot>();
  /** Accounts written since the last checkpoint (keys as above). */
  private readonly written = new Set<string>();

  private constructor(
    private readonly dir: string | undefined,
    private readonly log: RecordLog,
    private readonly index: SignatureIndex,
    private readonly hooks: StateHooks,
    private readonly unlock: () => void,
  ) {}

  /**
   * `lockHeld`: the caller took the dir's lock (lockChainDir) and releases it itself. `syncLog`:
   * whether a record is synced to the disk before its send is acknowledged (TxLogOptions.sync).
   */
  static open(dir: string | undefined, genesisAccounts: Uint8Array[], programs: readonly ProgramImage[], hooks: StateHooks, { lockHeld = false, syncLog = true } = {}): ChainStore {
    if (dir === undefined) {
      hooks.deploy(programs);
      return new ChainStore(undefined, new MemoryLog(), SignatureIndex.memory(), hooks, () => {});
    }
    const unlock = lockHeld ? () => {} : lockChainDir(dir);
    let log: TxLog | undefined;
    let index: SignatureIndex | undefined;
    try {
      const cp = readCheckpoint(join(dir, "checkpoint"));
      log = TxLog.open(join(dir, "txlog"), { sync: syncLog });
      const from = cp?.logOffset ?? 0;
      if (log.size < from) throw new Error(`${dir}: txlog is shorter than the checkpoint says (${log.size} < ${from})`);
      checkProgramNotes(dir, programs, { replayNeeded: log.size > from });
      if (cp) hooks.restore(cp.accounts, cp.slot);
      hooks.deploy(programs);
      index = SignatureIndex.open(join(dir, "txindex"), cp?.indexLength ?? 0);
      const store = new ChainStore(dir, log, index, hooks, unlock);
      store.lastSlot = cp?.slot ?? null;
      for (const a of cp?.accounts ?? []) store.accounts.set(signatureKey(a.address), a);
      if (!cp) for (const a of genesisAccounts) store.written.add(signatureKey(a));
      const end = { offset: from };
      for (const { offset, record } of log.scan(from, end)) {
        hooks.replay(record);
        store.track(record, offset);
      }
      // Only the last frame can be torn by a crash; it was never acknowledged.
      if (end.offset < log.size) log.truncate(end.offset);
      return store;
    } catch (err) {
      log?.close();
      index?.close();
      unlock();
      throw err;
    }
  }

  private track(record: LogRecord, offset: number): void {
    if (this.dir !== undefined) for (const a of writtenAccounts(record)) this.written.add(signatureKey(a));
    // The first signature follows a one-byte count (a legacy transaction has < 128 signatures).
    if (record.kind === "tx") this.index.add(signatureKey(record.wire.subarray(1, 65)), offset);
    this.lastSlot = record.slot;
    this.recordsSinceCheckpoint++;
  }

  /** Logs a change already applied in memory; resolves when it is durable. */
  append(record: LogRecord): Promise<void> {
    this.track(record, this.log.append(encodeRecord(record)));
    return this.log.durable();
  }

  /** Every change since the chain began, oldest first. */
  history(): Iterable<LogRecord> {
    return this.log.history();
  }

  lookup(key: string): LogRecord | undefined {
    const offset = this.index.get(key);
    return offset === undefined ? undefined : this.log.read(offset);
  }

  /**
   * Reads the accounts and notes the log offset they correspond to at once, so no transaction
   * executes between the two, then writes without holding the thread: the log and the index are
   * synced before the checkpoint that vouches for them is renamed into place. One at a time.
   */
  async checkpoint(slot: bigint): Promise<void> {
    this.recordsSinceCheckpoint = 0;
    if (this.dir === undefined) return;
    const logOffset = this.log.size;
    const accounts = this.currentAccounts();
    const [indexLength] = await Promise.all([this.index.persistBefore(logOffset), this.log.flush()]);
    await writeCheckpoint(join(this.dir, "checkpoint"), { slot, logOffset, indexLength, accounts });
  }

  /** The accounts the log's records have written, as they are now: those written since the last checkpoint read again. */
  private currentAccounts(): AccountSnapshot[] {
    for (const key of this.written) {
      const address = new Uint8Array(Buffer.from(key, "latin1"));
      const account = this.hooks.account(address);
      if (account) this.accounts.set(key, { address, ...account });
      else this.accounts.delete(key);
    }
    this.written.clear();
    return [...this.accounts.values()];
  }

  close(): void {
    this.log.close();
    this.index.close();
    this.unlock();
  }
}
