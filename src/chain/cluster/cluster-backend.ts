/**
 * The chain as a Solana cluster reached over JSON-RPC (devnet, mainnet, a local validator, or
 * `svc chain serve`), with the same promises as the embedded chain: `sendTransaction` resolves
 * once the transaction is confirmed, throws ChainTxError with `landed: true` when it executed and
 * failed, and with `landed: false` only once it can no longer land (its blockhash expired
 * unseen). Until then it is broadcast again every few seconds, since a leader may drop it.
 * Transactions are sent without preflight: a failing one lands, pays its fee and reports its
 * error, as on the embedded chain, instead of vanishing at a node's simulation.
 */
import {
  SOLANA_ERROR__JSON_RPC__INVALID_PARAMS,
  SOLANA_ERROR__JSON_RPC__SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE,
  SOLANA_ERROR__JSON_RPC__SERVER_ERROR_TRANSACTION_SIGNATURE_VERIFICATION_FAILURE,
  SOLANA_ERROR__TRANSACTION_ERROR__BLOCKHASH_NOT_FOUND,
  SOLANA_ERROR__TRANSACTION_ERROR__SIGNATURE_FAILURE,
  createSolanaRpcFromTransport,
  isSolanaError,
  lamports,
  type Address,
  type Base64EncodedWireTransaction,
  type Blockhash,
  type Rpc,
  type SolanaRpcApi,
  type Signature,
} from "@solana/kit";
import { base58Decode, base58Encode } from "../../core/index.ts";
import { TOKEN_ACCOUNT_SIZE, TOKEN_PROGRAM } from "../addresses.ts";
import { ChainTxError, MAX_ACCOUNTS_PER_REQUEST, type AccountInfo, type ChainBackend, type RecentBlockhash, type SentTransaction, type StoredTransaction, type TransactionStatus } from "../backend.ts";
import { BoundedMap } from "../../core/index.ts";
import { describeRpcTransactionError } from "../svm-errors.ts";
import { parseTransaction } from "../wire.ts";
import { storedTransaction, type RpcTransactionResult } from "./stored-transaction.ts";
import { SignatureWatch } from "./signature-watch.ts";
import { DEFAULT_RETRY_POLICY, retryingTransport, type RetryPolicy } from "./transport.ts";

export interface ClusterBackendOptions {
  /** The RPC node's HTTP(S) address. */
  url: string;
  /** When a transaction counts as done: `confirmed` (a supermajority voted) or `finalized`. */
  commitment?: "confirmed" | "finalized";
  /** How often transactions in flight are checked. */
  pollMs?: number;
  /**
   * How soon after its send a transaction is first checked (default 5 ms, right for a chain that
   * executes on receipt like `svc chain serve`; a real cluster confirms in ~0.5 s, so ~300 saves calls).
   */
  firstCheckMs?: number;
  /** How often a transaction not yet seen is broadcast again. */
  rebroadcastMs?: number;
  /** How long a blockhash is reused for new transactions before asking for a newer one. */
  blockhashTtlMs?: number;
  /** A send gives up (the journal resumes it later) after the node has been unreachable this long. */
  unreachableMs?: number;
  retry?: RetryPolicy;
}

function sleep(ms: number): Promise<null> {
  return new Promise((resolve) => setTimeout(resolve, ms, null));
}

function accountInfo(address: Address, value: { lamports: bigint; owner: Address; executable: boolean; data: readonly [string, string] }): AccountInfo {
  return { address, lamports: value.lamports, owner: value.owner, executable: value.executable, data: Buffer.from(value.data[0], "base64") };
}

/** The transaction error inside a node's refusal of `sendTransaction`, in the runtime's spelling. */
function refusalReason(err: unknown): string | undefined {
  if (isSolanaError(err, SOLANA_ERROR__JSON_RPC__SERVER_ERROR_TRANSACTION_SIGNATURE_VERIFICATION_FAILURE)) return "SignatureFailure";
  if (isSolanaError(err, SOLANA_ERROR__JSON_RPC__INVALID_PARAMS)) return "SanitizeFailure";
  if (!isSolanaError(err, SOLANA_ERROR__JSON_RPC__SERVER_ERROR_SEND_TRANSACTION_PREFLIGHT_FAILURE)) return undefined;
  const cause = err.cause;
  if (isSolanaError(cause, SOLANA_ERROR__TRANSACTION_ERROR__BLOCKHASH_NOT_FOUND)) return "BlockhashNotFound";
  if (isSolanaError(cause, SOLANA_ERROR__TRANSACTION_ERROR__SIGNATURE_FAILURE)) return "SignatureFailure";
  return isSolanaError(cause) ? `TransactionError#${cause.context.__code}` : "PreflightFailure";
}

export class ClusterBackend implements ChainBackend {
  private readonly rpc: Rpc<SolanaRpcApi>;
  private readonly watch: SignatureWatch;
  private readonly options: Required<Omit<ClusterBackendOptions, "retry" | "url">>;
  /** Blockhashes this process handed out, with their last valid block height. */
  private readonly issued = new BoundedMap<bigint>(1_000);
  /** Signatures this process saw land: sending one again answers from its status. */
  private readonly landedHere = new BoundedMap<true>(10_000);
  private readonly inflight = new Map<string, Promise<SentTransaction>>();
  private readonly rent = new Map<number, bigint>();
  private latest: { at: number; value: Promise<RecentBlockhash> } | undefined;
  private closed = false;

  constructor(options: ClusterBackendOptions) {
    this.rpc = createSolanaRpcFromTransport(retryingTransport(options.url, options.retry ?? DEFAULT_RETRY_POLICY));
    this.options = {
      commitment: options.commitment ?? "confirmed",
      pollMs: options.pollMs ?? 400,
      firstCheckMs: options.firstCheckMs ?? 5,
      rebroadcastMs: options.rebroadcastMs ?? 2_000,
      blockhashTtlMs: options.blockhashTtlMs ?? 1_000,
      unreachableMs: options.unreachableMs ?? 30_000,
    };
    this.watch = new SignatureWatch((signatures) => this.statuses(signatures), this.options.pollMs, this.options.firstCheckMs);
  }

  /** Statuses at the backend's commitment or beyond; null for signatures not (yet) there. */
  private async statuses(signatures: string[]): Promise<(TransactionStatus | null)[]> {
    const { value } = await this.rpc.getSignatureStatuses(signatures as Signature[], { searchTransactionHistory: true }).send();
    const wanted = this.options.commitment === "finalized" ? ["finalized"] : ["confirmed", "finalized"];
    return value.map((s) => {
      if (!s || !wanted.includes(s.confirmationStatus ?? "")) return null;
      return s.err === null ? { slot: s.slot, ok: true } : { slot: s.slot, ok: false, err: describeRpcTransactionError(s.err) };
    });
  }

  latestBlockhash(): Promise<RecentBlockhash> {
    // Every transaction the service signs asks for one; a second-old blockhash has ~60 s to live.
    if (this.latest && Date.now() - this.latest.at < this.options.blockhashTtlMs) return this.latest.value;
    const value = this.rpc.getLatestBlockhash({ commitment: this.options.commitment }).send().then(({ value: v }) => {
      this.issued.set(v.blockhash, v.lastValidBlockHeight);
      return { blockhash: v.blockhash, bytes: base58Decode(v.blockhash, 32), lastValidBlockHeight: v.lastValidBlockHeight };
    });
    this.latest = { at: Date.now(), value };
    value.catch(() => (this.latest = undefined));
    return value;
  }

  async sendTransaction(wire: Uint8Array): Promise<SentTransaction> {
    let tx;
    try {
      tx = parseTransaction(wire);
    } catch (err) {
      throw new ChainTxError(`malformed transaction: ${(err as Error).message}`, { signature: "", err: "SanitizeFailure", logs: [], landed: false });
    }
    const signature = tx.signatures[0] ? base58Encode(tx.signatures[0]) : "";
    const pending = this.inflight.get(signature);
    if (pending) return pending.then((sent) => ({ ...sent, alreadyProcessed: true }));
    const sending = this.sendOnce(wire, signature, base58Encode(tx.blockhash));
    this.inflight.set(signature, sending);
    try {
      return await sending;
    } finally {
      this.inflight.delete(signature);
    }
  }

  private async sendOnce(wire: Uint8Array, signature: string, blockhash: string): Promise<SentTransaction> {
    // Sent before (a resumed action signed before this process started, or a repeat): it may have landed.
    if (!this.issued.has(blockhash) || this.landedHere.has(signature)) {
      const [earlier] = await this.statuses([signature]);
      if (earlier) return this.outcome(signature, earlier, true);
    }
    const status = await this.confirm(wire, signature, blockhash);
    this.landedHere.set(signature, true);
    return this.outcome(signature, status, false);
  }

  private async outcome(signature: string, status: TransactionStatus, alreadyProcessed: boolean): Promise<SentTransaction> {
    if (status.ok) return { signature, slot: status.slot, alreadyProcessed };
    const err = status.err ?? "unknown error";
    const logs = (await this.getTransaction(signature).catch(() => null))?.logs ?? [];
    throw new ChainTxError(`transaction ${signature} failed: ${err}`, { signature, err, logs, landed: true, slot: Number(status.slot) });
  }

  /** Broadcasts until the transaction has a status or can no longer land. */
  private async confirm(wire: Uint8Array, signature: string, blockhash: string): Promise<TransactionStatus> {
    const encoded = Buffer.from(wire).toString("base64") as Base64EncodedWireTransaction;
    let refused = await this.broadcast(encoded);
    // Watched from after the send: a check before it would only find nothing.
    const landed = this.watch.wait(signature);
    try {
      for (;;) {
        if (refused && refused !== "BlockhashNotFound") return await this.notLanded(signature, refused);
        const status = await Promise.race([landed, sleep(refused ? this.options.pollMs : this.options.rebroadcastMs)]);
        if (status) return status;
        if (this.closed) throw new Error("the chain backend was closed while a transaction was in flight");
        if (!(await this.canStillLand(blockhash))) return await this.notLanded(signature, "BlockhashNotFound");
        refused = await this.broadcast(encoded);
      }
    } finally {
      this.watch.forget(signature);
    }
  }

  /** Sends the bytes; returns the node's refusal reason, or undefined when it took them (or could not be reached). */
  private async broadcast(encoded: Base64EncodedWireTransaction): Promise<string | undefined> {
    try {
      await this.rpc.sendTransaction(encoded, { encoding: "base64", skipPreflight: true, maxRetries: 0n }).send();
      return undefined;
    } catch (err) {
      const reason = refusalReason(err);
      // Unreachable: the next round broadcasts again, and canStillLand decides when to stop.
      if (reason === undefined && Date.now() - this.watch.lastReachedAt < this.options.unreachableMs) return undefined;
      if (reason === undefined) throw err;
      return reason;
    }
  }

  /** Whether the blockhash is still valid; an unreachable node counts as "yes" until `unreachableMs`. */
  private async canStillLand(blockhash: string): Promise<boolean> {
    try {
      const { value } = await this.rpc.isBlockhashValid(blockhash as Blockhash, { commitment: this.options.commitment }).send();
      this.watch.lastReachedAt = Date.now();
      return value;
    } catch (err) {
      if (Date.now() - this.watch.lastReachedAt < this.options.unreachableMs) return true;
      throw err;
    }
  }

  /** The refusal stands unless the signature landed after all (an earlier broadcast of the same bytes). */
  private async notLanded(signature: string, reason: string): Promise<TransactionStatus> {
    const [status] = await this.statuses([signature]);
    if (status) return status;
    throw new ChainTxError(`transaction ${signature} failed: ${reason}`, { signature, err: reason, logs: [], landed: false });
  }

  async settledStatus(wire: Uint8Array): Promise<TransactionStatus | null> {
    const tx = parseTransaction(wire);
    const signature = base58Encode(tx.signatures[0]!);
    for (;;) {
      const [status] = await this.statuses([signature]);
      if (status) return status;
      if (!(await this.canStillLand(base58Encode(tx.blockhash)))) return (await this.statuses([signature]))[0] ?? null;
      await sleep(this.options.pollMs);
    }
  }

  async getTransactionStatus(signature: string): Promise<TransactionStatus | null> {
    return (await this.statuses([signature]))[0] ?? null;
  }

  async getTransaction(signature: string): Promise<StoredTransaction | null> {
    const found = await this.rpc
      .getTransaction(signature as Signature, { encoding: "base64", maxSupportedTransactionVersion: 0, commitment: this.options.commitment })
      .send();
    return found ? storedTransaction(signature, found as unknown as RpcTransactionResult) : null;
  }

  async getAccount(address: Address): Promise<AccountInfo | null> {
    const { value } = await this.rpc.getAccountInfo(address, { encoding: "base64", commitment: this.options.commitment }).send();
    return value ? accountInfo(address, value) : null;
  }

  /** getMultipleAccounts, MAX_ACCOUNTS_PER_REQUEST at a time. */
  async getAccounts(addresses: readonly Address[]): Promise<(AccountInfo | null)[]> {
    const accounts: (AccountInfo | null)[] = [];
    for (let at = 0; at < addresses.length; at += MAX_ACCOUNTS_PER_REQUEST) {
      const some = addresses.slice(at, at + MAX_ACCOUNTS_PER_REQUEST);
      const { value } = await this.rpc.getMultipleAccounts(some, { encoding: "base64", commitment: this.options.commitment }).send();
      some.forEach((address, i) => accounts.push(value[i] ? accountInfo(address, value[i]) : null));
    }
    return accounts;
  }

  async getTokenBalance(tokenAccount: Address): Promise<bigint | null> {
    const account = await this.getAccount(tokenAccount);
    if (!account || account.owner !== TOKEN_PROGRAM || account.data.length !== TOKEN_ACCOUNT_SIZE) return null;
    return Buffer.from(account.data).readBigUInt64LE(64);
  }

  async minimumBalanceForRentExemption(space: number): Promise<bigint> {
    const known = this.rent.get(space);
    if (known !== undefined) return known;
    const rent = await this.rpc.getMinimumBalanceForRentExemption(BigInt(space)).send();
    this.rent.set(space, rent);
    return rent;
  }

  async requestAirdrop(address: Address, amount: bigint): Promise<void> {
    const signature = await this.rpc.requestAirdrop(address, lamports(amount), { commitment: this.options.commitment }).send();
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<null>((resolve) => (timer = setTimeout(resolve, 60_000, null)));
    const status = await Promise.race([this.watch.wait(signature), timeout]);
    // Not left pending: a command that airdrops (`svc chain init`) would otherwise wait it out before exiting.
    clearTimeout(timer);
    this.watch.forget(signature);
    if (!status?.ok) throw new Error(`airdrop ${signature} to ${address} ${status ? `failed: ${status.err}` : "was not confirmed within 60 s"}`);
  }

  async getSlot(): Promise<bigint> {
    return this.rpc.getSlot({ commitment: this.options.commitment }).send();
  }

  async getBlockHeight(): Promise<bigint> {
    return this.rpc.getBlockHeight({ commitment: this.options.commitment }).send();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.watch.close();
  }
}
