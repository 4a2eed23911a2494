/**
 * Deposits and withdrawals a wallet signs itself (the web app's "Add credits" and "Withdraw"):
 * the service builds the transaction, paying its fee, the wallet signs it, and the service
 * checks the signed copy is the one it built before it records and sends it through the chain
 * journal. A deposit is credited once it confirms (credit.topup); a withdrawal is reserved in the
 * ledger first, so jobs running at the same time cannot spend it, and posted once it confirms or
 * released if the chain refuses it. Prepared transactions wait in memory for their signature
 * until their blockhash expires; one that is never signed costs nothing.
 */
import type { Address } from "@solana/kit";
import { signWalletSlot, walletSignedCopy, type ActionOwner, type Chain, type ChainAction, type ChainJournal } from "../chain/index.ts";
import { ApiError, creditsToBaseUnits, generateKeypair, newId, type Signer } from "../core/index.ts";
import * as ledger from "../ledger/index.ts";
import { sqlState, type Db } from "../store/index.ts";
import { creditDeposit } from "./deposits.ts";
import { availableCredits, checkCreditLow, toCredits } from "./balance.ts";
import type { CreditBook } from "./credit-book.ts";

/** The spec's smallest top-up. */
export const MIN_DEPOSIT_CREDITS = 100;
/** How long a prepared transaction waits for the wallet's signature (its blockhash lasts about as long). */
const PREPARED_TTL_MS = 60_000;

type PaymentKind = "wallet_deposit" | "withdrawal";

interface Prepared {
  kind: PaymentKind;
  wallet: string;
  credits: number;
  wire: Uint8Array;
  signature: string;
  expiresAt: number;
  /** Set once its signed copy is taken: a repeat is told so instead of sending it again. */
  submitted?: boolean;
}

export interface PreparedPayment {
  id: string;
  /** The transaction for the wallet to sign, base64, with the service's fee-payer signature in place. */
  transaction: string;
  credits: number;
}

/** A Solana Pay transaction request: a phone wallet fetches the deposit transaction and sends it itself. */
interface PayRequest {
  wallet: string;
  credits: number;
  expiresAt: number;
  /** Once the wallet has fetched it: the recorded deposit and its blockhash's last slot. */
  action?: ChainAction;
  lastValidBlockHeight?: number;
}

export interface PayRequestState {
  state: "waiting" | "sent" | "confirmed" | "failed" | "dropped";
  signature: string | null;
  creditsRemaining: number | null;
}

export interface SentPayment {
  signature: string;
  credits: number;
  creditsRemaining: number;
}

const withdrawalId = (signature: string) => `withdrawal:${signature}`;

const PAYMENT_NAMES: Record<PaymentKind, string> = { wallet_deposit: "deposit", withdrawal: "withdrawal" };

/** A payment whose transaction was already taken: what happened to it, never a second send. */
function alreadySubmitted(p: Prepared): ApiError {
  const name = PAYMENT_NAMES[p.kind];
  return new ApiError(
    "conflict",
    `This ${name} was already submitted as transaction ${p.signature}; it is not sent twice. Its outcome shows in your ${name}s; to make another, prepare a new one.`,
    "id",
    { signature: p.signature },
  );
}

/** A fresh key that marks a deposit for anyone watching the chain (Solana Pay's reference). */
function referenceKey(): Address {
  return generateKeypair().address;
}

function depositOwner(): ActionOwner {
  return {
    confirmed: creditDeposit,
    rejected: async () => undefined,
    // Only the wallet can sign a new one; the app asks it again.
    rebuild: async () => undefined,
    dropped: async () => undefined,
  };
}

function withdrawalOwner(): ActionOwner {
  const release = async (tx: Db, action: ChainAction) => {
    await ledger.voidPending(tx, { id: `release:${action.signature}`, pendingId: withdrawalId(action.signature) });
  };
  return {
    async confirmed(tx, action) {
      const result = await ledger.postPending(tx, { id: `post:${action.signature}`, pendingId: withdrawalId(action.signature) });
      const remaining = toCredits(result.accounts.find((a) => a.id === ledger.walletAccountId(action.subject))?.available ?? 0n);
      await checkCreditLow(tx, action.subject, remaining, true);
      return remaining;
    },
    rejected: release,
    rebuild: async () => undefined,
    dropped: release,
  };
}

export class WalletPayments {
  private readonly prepared = new Map<string, Prepared>();
  private readonly requests = new Map<string, PayRequest>();

  constructor(
    private readonly db: Db,
    private readonly journal: ChainJournal,
    private readonly chain: Chain,
    /** The node's book of wallets' credits, when it is the ledger's only writer: a withdrawal is a decrease it must hear of. */
    private readonly book?: CreditBook,
  ) {
    journal.register("wallet_deposit", depositOwner());
    journal.register("withdrawal", withdrawalOwner());
  }

  private keep(p: Omit<Prepared, "expiresAt">): PreparedPayment {
    const now = Date.now();
    for (const [id, old] of this.prepared) if (old.expiresAt < now) this.prepared.delete(id);
    const id = newId("pay");
    this.prepared.set(id, { ...p, expiresAt: now + PREPARED_TTL_MS });
    return { id, transaction: Buffer.from(p.wire).toString("base64"), credits: p.credits };
  }

  async prepareDeposit(wallet: string, credits: number): Promise<PreparedPayment> {
    await this.checkDeposit(wallet, credits);
    const tx = await this.chain.prepareWalletDeposit({ wallet, credits, reference: referenceKey() });
    return this.keep({ kind: "wallet_deposit", wallet, credits, wire: tx.wire, signature: tx.signature });
  }

  /** Checks a deposit is possible before it is asked for: the minimum, and the wallet's USDC. */
  private async checkDeposit(wallet: string, credits: number): Promise<void> {
    if (credits < MIN_DEPOSIT_CREDITS) throw new ApiError("invalid_request", `A deposit is at least ${MIN_DEPOSIT_CREDITS} credits (${MIN_DEPOSIT_CREDITS / 100} USDC).`, "credits");
    const held = await this.chain.walletUsdc(wallet);
    if (creditsToBaseUnits(credits) > held) {
      throw new ApiError("invalid_request", `Your wallet holds ${toCredits(held)} credits' worth of USDC (${Number(held) / 1e6} USDC); ${credits} credits need ${credits / 100} USDC.`, "credits");
    }
  }

  /** A Solana Pay transaction request for a deposit (the app's QR code); valid for 10 minutes. */
  async createPayRequest(wallet: string, credits: number): Promise<string> {
    await this.checkDeposit(wallet, credits);
    const id = newId("pay");
    this.requests.set(id, { wallet, credits, expiresAt: Date.now() + 10 * PREPARED_TTL_MS });
    return id;
  }

  /**
   * What a phone wallet fetches: the deposit transaction for `account`, the fee payer's signature
   * in place. It is recorded before it leaves, like every transaction the service signs, and
   * credited when the chain has it (`payRequestState`).
   */
  async transactionRequest(id: string, account: string): Promise<{ transaction: string; credits: number }> {
    const request = this.requests.get(id);
    if (!request || request.expiresAt < Date.now() || request.action) throw new ApiError("not_found", `No payment request '${id}' is open.`, "id");
    if (account !== request.wallet) throw new ApiError("invalid_request", `This request is for ${request.wallet}; pay it with that wallet's account.`, "account");
    const tx = await this.chain.prepareWalletDeposit({ wallet: request.wallet, credits: request.credits, reference: referenceKey() });
    const action: ChainAction = { kind: "wallet_deposit", subject: request.wallet, signature: tx.signature, wire: tx.wire, params: { credits: request.credits } };
    await this.journal.record(this.db, action);
    Object.assign(request, { action, lastValidBlockHeight: tx.lastValidBlockHeight });
    return { transaction: Buffer.from(tx.wire).toString("base64"), credits: request.credits };
  }

  /** Where a payment request stands, applying what the chain did with it (the page polls this). */
  async payRequestState(wallet: string, id: string): Promise<PayRequestState> {
    const request = this.requests.get(id);
    if (!request || request.wallet !== wallet) throw new ApiError("not_found", `No payment request '${id}' is open.`, "id");
    if (!request.action) return { state: request.expiresAt < Date.now() ? "dropped" : "waiting", signature: null, creditsRemaining: null };
    const state = await this.journal.observe(request.action, request.lastValidBlockHeight!);
    const creditsRemaining = state === "confirmed" ? await availableCredits(this.db, wallet) : null;
    return { state, signature: request.action.signature, creditsRemaining };
  }

  async prepareWithdrawal(wallet: string, credits: number): Promise<PreparedPayment> {
    const available = await availableCredits(this.db, wallet);
    if (credits > available) throw new ApiError("invalid_request", `You can withdraw up to ${available} credits: the rest is held for running jobs or not there.`, "credits");
    const tx = await this.chain.prepareWithdrawal({ wallet, credits });
    return this.keep({ kind: "withdrawal", wallet, credits, wire: tx.wire, signature: tx.signature });
  }

  /** `svc dev`'s dev wallet signs here, server-side, as a browser wallet would (the app's "Use the dev wallet"). */
  signAs(signer: Signer, id: string): string {
    const p = this.prepared.get(id);
    if (!p || p.wallet !== signer.address) throw new ApiError("not_found", `No transaction '${id}' is waiting for this wallet's signature; prepare it again.`, "id");
    return Buffer.from(signWalletSlot(p.wire, signer)).toString("base64");
  }

  /**
   * Checks the wallet's signed copy, records it (a withdrawal reserving its credits first) and
   * sends it. A prepared payment is taken once (each is a transaction of its own: the chain's
   * payments carry a fresh nonce); a repeat answers 409 conflict with its signature.
   */
  async submit(wallet: string, id: string, signedBase64: string): Promise<SentPayment> {
    const p = this.prepared.get(id);
    if (!p || p.wallet !== wallet) throw new ApiError("not_found", `No transaction '${id}' is waiting for this wallet's signature; prepare it again.`, "id");
    if (p.submitted) throw alreadySubmitted(p);
    if (p.expiresAt < Date.now()) throw new ApiError("not_found", `No transaction '${id}' is waiting for this wallet's signature; prepare it again.`, "id");
    let signed: Uint8Array;
    try {
      signed = walletSignedCopy(p.wire, new Uint8Array(Buffer.from(signedBase64, "base64")), wallet);
    } catch (error) {
      throw new ApiError("invalid_request", `Refused: ${(error as Error).message}. Nothing was sent.`, "transaction");
    }
    // Claimed before the first await, so a concurrent repeat cannot pass the checks above too.
    p.submitted = true;
    const action: ChainAction = { kind: p.kind, subject: wallet, signature: p.signature, wire: signed, params: { credits: p.credits } };
    await this.recordSubmitted(id, p, action);
    const sent = await this.journal.send(action);
    const creditsRemaining = typeof sent.outcome === "number" ? sent.outcome : await availableCredits(this.db, wallet);
    return { signature: action.signature, credits: p.credits, creditsRemaining };
  }

  /**
   * Records the action (a withdrawal reserving its credits first). Another gateway node that took
   * the same transaction has its row already: that is a repeat too. When nothing was recorded the
   * prepared copy is dropped, as before any send: the wallet prepares again.
   */
  private async recordSubmitted(id: string, p: Prepared, action: ChainAction): Promise<void> {
    const change = p.kind === "withdrawal" ? await this.book?.takeAlone(p.wallet, p.credits) : undefined;
    try {
      await this.db.transaction(async (tx) => {
        if (p.kind === "withdrawal") await this.reserveWithdrawal(tx, p, action.signature);
        await this.journal.record(tx, action);
      });
      change?.done(true);
    } catch (error) {
      change?.done(false);
      if (sqlState(error) === "23505") throw alreadySubmitted(p);
      this.prepared.delete(id);
      throw error;
    }
  }

  private async reserveWithdrawal(tx: Db, p: Prepared, signature: string): Promise<void> {
    try {
      await ledger.transfer(tx, {
        id: withdrawalId(signature),
        debitAccountId: ledger.walletAccountId(p.wallet),
        creditAccountId: ledger.FUNDING_ACCOUNT,
        amount: creditsToBaseUnits(p.credits),
        pending: true,
        code: "withdrawal",
        reference: signature,
      });
    } catch (error) {
      if (!(error instanceof ledger.ExceedsCreditsError)) throw error;
      throw new ApiError("invalid_request", "Running jobs now hold some of these credits; withdraw less. Nothing was sent.", "credits");
    }
  }

  /** The wallet's withdrawals, newest first, with their transactions. */
  async recentWithdrawals(wallet: string, limit: number): Promise<{ credits: number; at: Date; withdrawalTx: string | null; state: string }[]> {
    const transfers = await ledger.listTransfers(this.db, { accountId: ledger.walletAccountId(wallet), code: "withdrawal", kind: "pending", limit, newestFirst: true });
    return transfers.map((t) => ({ credits: toCredits(t.amount), at: t.createdAt, withdrawalTx: t.reference, state: t.pendingState ?? "pending" }));
  }
}
