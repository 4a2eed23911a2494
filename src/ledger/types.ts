/** The ledger's records as the rest of the system sees them. Amounts are USDC base units. */

/**
 * What an account is for. `funding` is the outside world (deposits come from it, withdrawals go to
 * it) and may run a debit balance; `escrow` holds a wallet's reservations until they settle.
 */
export type AccountCode = "wallet" | "worker" | "escrow" | "treasury" | "funding";

export interface Account {
  id: string;
  code: AccountCode;
  debitsMustNotExceedCredits: boolean;
  debitsPending: bigint;
  debitsPosted: bigint;
  creditsPending: bigint;
  creditsPosted: bigint;
  /** credits_posted - debits_posted - debits_pending: what a new debit may still use. */
  available: bigint;
  /** credits_posted - debits_posted. */
  balance: bigint;
  createdAt: Date;
}

/**
 * `posted` and `pending` move value between two accounts (a pending one only reserves it);
 * `post_pending` and `void_pending` resolve a pending transfer named by `pendingId`.
 */
export type TransferKind = "posted" | "pending" | "post_pending" | "void_pending";

/** Where a pending transfer stands; derived from whether a post or void names it. */
export type PendingState = "pending" | "posted" | "voided";

export interface Transfer {
  id: string;
  kind: TransferKind;
  debitAccountId: string;
  creditAccountId: string;
  /** For `void_pending` the amount released, for `post_pending` the amount posted. */
  amount: bigint;
  pendingId: string | null;
  code: TransferCode;
  /** Free text tying the transfer to something else, e.g. a job id. */
  reference: string | null;
  createdAt: Date;
  /** Set on `pending` transfers only, as of when the row was read. */
  pendingState: PendingState | null;
}

/** A retried operation (same id) returns what the first attempt recorded, marked "exists". */
export interface TransferResult {
  status: "created" | "exists";
  transfer: Transfer;
  /**
   * Every account the transfers name, sorted by id, with its totals as the operation left them
   * (read from the statement that changed them); for a retry ("exists"), as they stand now.
   */
  accounts: Account[];
}

/**
 * Why money moved. Every transfer carries one: a wallet's deposit and withdrawal, a job's reserve
 * (the escrow lock, pending) and charge (its posted part), and the charge's split into the worker's
 * payout and the protocol's fee; a dispute's bond (pending from the wallet to the treasury until
 * the outcome) and the charge an arbitration pays back.
 */
export type TransferCode = "deposit" | "withdrawal" | "reserve" | "charge" | "worker_payout" | "protocol_fee" | "dispute_bond" | "dispute_refund" | "charge_returned";
