/**
 * What the chain layer needs from a Solana backend. The embedded LiteSVM backend implements it
 * today; an RPC backend for a real cluster implements the same calls, so transaction code does
 * not depend on where transactions go.
 */
import type { Address } from "@solana/kit";
import type { TxMeta } from "./tx-meta.ts";
import type { AirdropRecord, LogRecord, TxRecord } from "./txlog.ts";

export interface RecentBlockhash {
  /** base58, as RPC returns it. */
  blockhash: string;
  bytes: Uint8Array;
  /**
   * The last block height at which a transaction carrying this blockhash can still execute. On a
   * cluster heights lag slots (skipped slots have no block); on the embedded chain they are equal.
   */
  lastValidBlockHeight: bigint;
}

export interface SentTransaction {
  signature: string;
  /** The slot the transaction executed in. */
  slot: bigint;
  /** True when the signature had already executed; the earlier execution is the result. */
  alreadyProcessed: boolean;
}

export interface TransactionStatus {
  slot: bigint;
  ok: boolean;
  /** The transaction error when `ok` is false, e.g. `InstructionError(0, Custom(2))`. */
  err?: string;
}

export interface StoredTransaction extends TransactionStatus {
  signature: string;
  logs: string[];
  wire: Uint8Array;
  /** What the node reported beyond the outcome (fee, balances, inner instructions), where it kept it. */
  meta?: TxMeta;
}

export interface AccountInfo {
  address: Address;
  lamports: bigint;
  owner: Address;
  executable: boolean;
  data: Uint8Array;
}

/** The most accounts one getMultipleAccounts request may name: Solana's RPC limit, which the embedded RPC server keeps too. */
export const MAX_ACCOUNTS_PER_REQUEST = 100;

export interface ChainBackend {
  latestBlockhash(): Promise<RecentBlockhash>;
  /**
   * Executes a signed transaction. Resolves once its effect is durable. A signature that already
   * executed successfully resolves with `alreadyProcessed` instead of executing twice. Throws
   * ChainTxError when the transaction fails.
   */
  sendTransaction(wire: Uint8Array): Promise<SentTransaction>;
  getTransactionStatus(signature: string): Promise<TransactionStatus | null>;
  /**
   * A transaction's status once nothing can change it: its status when it landed, null once it can
   * no longer land. A cluster may still execute a copy handed to it earlier (before a crash) until
   * its blockhash expires, so this may wait that long; the embedded chain answers at once.
   */
  settledStatus(wire: Uint8Array): Promise<TransactionStatus | null>;
  getTransaction(signature: string): Promise<StoredTransaction | null>;
  getAccount(address: Address): Promise<AccountInfo | null>;
  /** Several accounts in one request (a cluster's getMultipleAccounts), in the order asked; null where there is none. */
  getAccounts(addresses: readonly Address[]): Promise<(AccountInfo | null)[]>;
  /** Base units held by an SPL token account; null when there is no such token account. */
  getTokenBalance(tokenAccount: Address): Promise<bigint | null>;
  minimumBalanceForRentExemption(space: number): Promise<bigint>;
  /** Development clusters only: funds an address with SOL for fees and rent. */
  requestAirdrop(address: Address, lamports: bigint): Promise<void>;
  getSlot(): Promise<bigint>;
  /** Blocks produced so far: what a blockhash's `lastValidBlockHeight` is compared against. */
  getBlockHeight(): Promise<bigint>;
  close(): Promise<void>;
}

/** What the embedded chain tells watchers (the JSON-RPC server's subscriptions), once it is durable. */
export type ChainEvent =
  | { type: "slot"; slot: bigint }
  | { type: "tx"; signature: string; record: TxRecord }
  | { type: "airdrop"; record: AirdropRecord };

export interface Simulation {
  ok: boolean;
  err?: string;
  logs: string[];
  unitsConsumed: bigint;
}

export interface SimulationOptions {
  sigVerify?: boolean;
  replaceBlockhash?: boolean;
}

/**
 * The embedded chain, in this thread (LiteSvmBackend) or on its own (ThreadedChainBackend): what
 * the JSON-RPC server needs beyond a cluster client's calls.
 */
export interface EmbeddedChainBackend extends ChainBackend {
  readonly embedded: true;
  /** Executes a transaction against the current state and throws the result away (preflight). */
  simulateTransaction(wire: Uint8Array, options?: SimulationOptions): Promise<Simulation>;
  /** Whether a transaction carrying this blockhash would be accepted now. */
  isBlockhashValid(blockhash: Uint8Array): Promise<boolean>;
  /** Every account a program owns; a scan, fine for a development chain. */
  programAccounts(program: Address): Promise<AccountInfo[]>;
  /** Every change since the chain began, oldest first, read from the journal. */
  history(): Promise<LogRecord[]>;
  /** Calls `watcher` after each slot and each durable change; returns the way to stop. */
  watch(watcher: (event: ChainEvent) => void): () => void;
}

export function isEmbedded(backend: ChainBackend): backend is EmbeddedChainBackend {
  return (backend as Partial<EmbeddedChainBackend>).embedded === true;
}

export class ChainTxError extends Error {
  override readonly name = "ChainTxError";
  constructor(
    message: string,
    readonly details: {
      signature: string;
      /** The runtime's error, e.g. `BlockhashNotFound` or `InstructionError(0, Custom(2))`. */
      err: string;
      logs: string[];
      /**
       * Whether the failed transaction is on-chain (its fee was charged and its signature is
       * known). A transaction that did not land can be fixed and sent again.
       */
      landed: boolean;
      /** Where a landed transaction executed. */
      slot?: number;
    },
  ) {
    super(message);
  }
}
