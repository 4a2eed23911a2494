/**
 * The embedded chain on a thread of its own. LiteSVM's execution, the journal's writes and its
 * checkpoints are a sizeable share of a loaded node's work; on the main thread they would take
 * that time from HTTP and the database, so they run beside it, on the machine's other core.
 * Every call is a message (chain-thread-main.ts answers it); the slot and the latest blockhash,
 * which every transaction the service builds asks for, are pushed to this side each slot, so
 * those need no round trip.
 */
import { MessageChannel, Worker, type MessagePort } from "node:worker_threads";
import type { Address } from "@solana/kit";
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
import type { LiteSvmBackendOptions } from "./litesvm-backend.ts";
import { threadModule } from "../core/index.ts";
import { lockChainDir } from "./persistence.ts";
import type { LogRecord } from "./txlog.ts";

/** The calls the thread answers: LiteSvmBackend's methods of the same names. */
export const THREAD_CALLS = [
  "sendTransaction", "getTransactionStatus", "settledStatus", "getTransaction", "getAccount", "getAccounts", "getTokenBalance",
  "minimumBalanceForRentExemption", "requestAirdrop", "simulateTransaction", "isBlockhashValid", "programAccounts",
  "history", "close",
] as const;
export type ThreadCall = (typeof THREAD_CALLS)[number];

export type ToThread =
  | { kind: "open"; options: LiteSvmBackendOptions }
  | { kind: "call"; id: number; method: ThreadCall; args: unknown[] }
  /** Whether the thread forwards its transactions and airdrops (slots always come). */
  | { kind: "watch"; on: boolean }
  /** A port through which another thread calls the same chain (ChainPortBackend). */
  | { kind: "connect"; port: MessagePort };

/** An error as it crosses threads: a ChainTxError keeps its details. */
export interface ThreadError {
  name: string;
  message: string;
  details?: ChainTxError["details"];
}

export type FromThread =
  | { kind: "ready" | "slot"; slot: bigint; latest: RecentBlockhash }
  | { kind: "reply"; id: number; value: unknown }
  | { kind: "fail"; id: number; error: ThreadError }
  | { kind: "event"; event: ChainEvent }
  | { kind: "open failed"; error: ThreadError };

export function toThreadError(err: unknown): ThreadError {
  if (err instanceof ChainTxError) return { name: err.name, message: err.message, details: err.details };
  const e = err instanceof Error ? err : new Error(String(err));
  return { name: e.name, message: e.message };
}

function fromThreadError(error: ThreadError): Error {
  if (error.details !== undefined) return new ChainTxError(error.message, error.details);
  const err = new Error(error.message);
  err.name = error.name;
  return err;
}

const THREAD_ENTRY = threadModule(import.meta.url, "chain-thread");

/**
 * Threads whose chain was closed cleanly, kept for the next open in this process: a new thread
 * loads the chain's modules again (about 0.45 s here), and a test process opens many chains.
 */
const idleThreads = new Map<Worker, () => void>();
const MAX_IDLE_THREADS = 2;

function takeThread(): Worker {
  for (const [worker, forget] of idleThreads) {
    idleThreads.delete(worker);
    worker.off("exit", forget);
    return worker;
  }
  return new Worker(THREAD_ENTRY, { execArgv: [] });
}

function keepIdle(worker: Worker): boolean {
  if (idleThreads.size >= MAX_IDLE_THREADS) return false;
  const forget = () => idleThreads.delete(worker);
  idleThreads.set(worker, forget);
  worker.once("exit", forget);
  worker.unref();
  return true;
}

/** Opens a chain on the thread; resolves with its first slot and blockhash. */
function openOn(worker: Worker, options: LiteSvmBackendOptions): Promise<{ slot: bigint; latest: RecentBlockhash }> {
  return new Promise((resolve, reject) => {
    const onMessage = (message: FromThread) => {
      if (message.kind === "open failed") {
        done();
        reject(fromThreadError(message.error));
      } else if (message.kind === "ready") {
        done();
        resolve(message);
      }
    };
    const onError = (err: Error) => {
      done();
      reject(err);
    };
    const onExit = (code: number) => onError(new Error(`the chain thread exited (code ${code}) while opening the chain`));
    const done = () => worker.off("message", onMessage).off("error", onError).off("exit", onExit);
    worker.on("message", onMessage).on("error", onError).on("exit", onExit);
    // A kept thread is unref'd; while the open is awaited, it must keep the process alive.
    worker.ref();
    worker.postMessage({ kind: "open", options } satisfies ToThread);
  });
}

interface Pending {
  resolve(value: unknown): void;
  reject(err: Error): void;
}

/** Shared by every backend, so a late reply to a closed chain's call never matches a later chain's. */
let nextCallId = 1;

/** What a backend talks to the chain thread through: the thread itself, or a port it handed out. */
interface ThreadEndpoint {
  postMessage(message: ToThread): void;
  ref(): void;
  unref(): void;
}

/**
 * The embedded chain as seen from another thread: every call a message to the chain thread, the
 * slot and blockhash kept from the thread's pushes.
 */
abstract class ChainThreadClient implements EmbeddedChainBackend {
  readonly embedded = true;
  private readonly pending = new Map<number, Pending>();
  private readonly watchers = new Set<(event: ChainEvent) => void>();
  protected failure: Error | null = null;
  protected closing: Promise<void> | null = null;

  protected constructor(
    private readonly endpoint: ThreadEndpoint,
    private slot: bigint,
    private latest: RecentBlockhash,
  ) {
    // Only a call in flight keeps the process alive, as the chain's own timers never did.
    endpoint.unref();
  }

  abstract close(): Promise<void>;

  protected receive(message: FromThread): void {
    switch (message.kind) {
      case "slot":
        this.slot = message.slot;
        this.latest = message.latest;
        this.emit({ type: "slot", slot: message.slot });
        return;
      case "event":
        return this.emit(message.event);
      case "reply":
      case "fail": {
        const call = this.pending.get(message.id);
        if (call === undefined) return;
        this.pending.delete(message.id);
        if (this.pending.size === 0) this.endpoint.unref();
        if (message.kind === "reply") call.resolve(message.value);
        else call.reject(fromThreadError(message.error));
        return;
      }
      default:
        this.fail(new Error(`the chain thread sent ${message.kind} after opening`));
    }
  }

  private emit(event: ChainEvent): void {
    for (const watcher of this.watchers) watcher(event);
  }

  /** The thread is gone: every call waiting on it, and every later one, fails with why. */
  protected fail(err: Error): void {
    this.failure ??= err;
    for (const call of this.pending.values()) call.reject(this.failure);
    this.pending.clear();
  }

  protected check(): void {
    if (this.closing) throw new Error("chain backend is closed");
    if (this.failure) throw this.failure;
  }

  private call<T>(method: ThreadCall, ...args: unknown[]): Promise<T> {
    try {
      this.check();
    } catch (err) {
      return Promise.reject(err as Error);
    }
    return this.send(method, args) as Promise<T>;
  }

  protected send(method: ThreadCall, args: unknown[]): Promise<unknown> {
    const id = nextCallId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      if (this.pending.size === 1) this.endpoint.ref();
      this.endpoint.postMessage({ kind: "call", id, method, args } satisfies ToThread);
    });
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

  sendTransaction(wire: Uint8Array): Promise<SentTransaction> {
    return this.call("sendTransaction", wire);
  }

  getTransactionStatus(signature: string): Promise<TransactionStatus | null> {
    return this.call("getTransactionStatus", signature);
  }

  settledStatus(wire: Uint8Array): Promise<TransactionStatus | null> {
    return this.call("settledStatus", wire);
  }

  getTransaction(signature: string): Promise<StoredTransaction | null> {
    return this.call("getTransaction", signature);
  }

  getAccount(address: Address): Promise<AccountInfo | null> {
    return this.call("getAccount", address);
  }

  getAccounts(addresses: readonly Address[]): Promise<(AccountInfo | null)[]> {
    return this.call("getAccounts", addresses);
  }

  getTokenBalance(tokenAccount: Address): Promise<bigint | null> {
    return this.call("getTokenBalance", tokenAccount);
  }

  minimumBalanceForRentExemption(space: number): Promise<bigint> {
    return this.call("minimumBalanceForRentExemption", space);
  }

  requestAirdrop(address: Address, lamports: bigint): Promise<void> {
    return this.call("requestAirdrop", address, lamports);
  }

  simulateTransaction(wire: Uint8Array, options: SimulationOptions = {}): Promise<Simulation> {
    return this.call("simulateTransaction", wire, options);
  }

  isBlockhashValid(blockhash: Uint8Array): Promise<boolean> {
    return this.call("isBlockhashValid", blockhash);
  }

  programAccounts(program: Address): Promise<AccountInfo[]> {
    return this.call("programAccounts", program);
  }

  history(): Promise<LogRecord[]> {
    return this.call("history");
  }

  watch(watcher: (event: ChainEvent) => void): () => void {
    // A closed chain's thread may already serve another chain: it hears nothing from this one.
    if (this.closing) return () => undefined;
    this.watchers.add(watcher);
    if (this.watchers.size === 1) this.endpoint.postMessage({ kind: "watch", on: true } satisfies ToThread);
    return () => {
      if (!this.watchers.delete(watcher) || this.watchers.size > 0 || this.closing) return;
      this.endpoint.postMessage({ kind: "watch", on: false } satisfies ToThread);
    };
  }

}

/** The embedded chain on a thread this one started and owns: it opens and closes the chain. */
export class ThreadedChainBackend extends ChainThreadClient {
  private readonly onMessage = (message: FromThread) => this.receive(message);
  private readonly onError = (err: Error) => this.fail(new Error(`the chain thread failed: ${err.message}`));
  private readonly onExit = (code: number) => this.fail(new Error(`the chain thread exited (code ${code})`));

  private constructor(
    private readonly worker: Worker,
    slot: bigint,
    latest: RecentBlockhash,
    /** Releases the data dir's lock, which this thread took for the chain thread. */
    private readonly unlock: () => void,
  ) {
    super(worker, slot, latest);
    worker.on("message", this.onMessage).on("error", this.onError).on("exit", this.onExit);
  }

  /** Opens the chain on a thread of its own (LiteSvmBackend.open's options). */
  static async open(options: LiteSvmBackendOptions = {}): Promise<ThreadedChainBackend> {
    const unlock = options.dataDir === undefined ? () => {} : lockChainDir(options.dataDir);
    const worker = takeThread();
    try {
      const { slot, latest } = await openOn(worker, { ...options, lockHeld: true });
      return new ThreadedChainBackend(worker, slot, latest, unlock);
    } catch (err) {
      void worker.terminate();
      unlock();
      throw err;
    }
  }

  /**
   * A port through which another thread reads and writes this chain (ChainPortBackend.open
   * there), as this thread does; it closes with the chain.
   */
  connectPort(): MessagePort {
    this.check();
    const { port1, port2 } = new MessageChannel();
    this.worker.postMessage({ kind: "connect", port: port2 } satisfies ToThread, [port2]);
    return port1;
  }

  /** Closes the chain on its thread (a last checkpoint) and lets the thread go. */
  close(): Promise<void> {
    this.closing ??= this.closeThread();
    return this.closing;
  }

  /** A thread whose chain closed cleanly waits for the next open; any other ends. */
  private async closeThread(): Promise<void> {
    let clean = false;
    try {
      if (!this.failure) {
        await this.send("close", []);
        clean = true;
      }
    } finally {
      this.worker.off("message", this.onMessage).off("error", this.onError).off("exit", this.onExit);
      if (!clean || !keepIdle(this.worker)) await this.worker.terminate();
      this.unlock();
      this.fail(new Error("chain backend is closed"));
    }
  }
}

/** The embedded chain from a thread handed a port to it (ThreadedChainBackend.connectPort). */
export class ChainPortBackend extends ChainThreadClient {
  private constructor(
    private readonly port: MessagePort,
    slot: bigint,
    latest: RecentBlockhash,
  ) {
    super(port, slot, latest);
    port.on("message", (message: FromThread) => this.receive(message));
    port.on("close", () => this.fail(new Error("the chain was closed")));
  }

  /** Waits for the chain thread to greet the port with its slot and blockhash. */
  static open(port: MessagePort): Promise<ChainPortBackend> {
    return new Promise((resolve, reject) => {
      const onClose = () => reject(new Error("the chain closed before the port was connected"));
      port.once("close", onClose);
      port.once("message", (message: FromThread) => {
        port.off("close", onClose);
        if (message.kind === "ready") resolve(new ChainPortBackend(port, message.slot, message.latest));
        else reject(new Error(`the chain thread sent ${message.kind} before ready`));
      });
    });
  }

  /** Lets go of the port; the chain stays open for its owner. */
  close(): Promise<void> {
    this.closing ??= Promise.resolve().then(() => {
      this.port.close();
      this.fail(new Error("chain backend is closed"));
    });
    return this.closing;
  }
}
