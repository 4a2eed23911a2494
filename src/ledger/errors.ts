/**
 * Why a ledger operation was refused. Every refusal leaves the ledger exactly as it was, so the
 * caller may report it and carry on (inside its own transaction, too: operations use savepoints).
 */

export abstract class LedgerError extends Error {
  abstract readonly code: string;
}

/** The debit would take a limited account (a wallet) past what it holds. */
export class ExceedsCreditsError extends LedgerError {
  override readonly name = "ExceedsCreditsError";
  readonly code = "exceeds_credits";
  constructor(
    readonly accountId: string,
    readonly amount: bigint,
    /** What the account could still spend when it was checked. */
    readonly available: bigint,
  ) {
    super(`account ${accountId} has ${available} available, ${amount} requested`);
  }
}

export class AccountNotFoundError extends LedgerError {
  override readonly name = "AccountNotFoundError";
  readonly code = "account_not_found";
  constructor(readonly accountId: string) {
    super(`no ledger account ${accountId}`);
  }
}

/** ensureAccount for an id that exists with another code or limit flag. */
export class AccountConflictError extends LedgerError {
  override readonly name = "AccountConflictError";
  readonly code = "account_conflict";
  constructor(readonly accountId: string) {
    super(`ledger account ${accountId} exists with a different code or flag`);
  }
}

/** A transfer id reused for a different transfer: a retry must repeat the original exactly. */
export class TransferIdConflictError extends LedgerError {
  override readonly name = "TransferIdConflictError";
  readonly code = "transfer_id_conflict";
  constructor(readonly transferId: string) {
    super(`transfer ${transferId} already exists with different fields`);
  }
}

/** No pending transfer has this id (there is none, or it is not a pending one). */
export class PendingTransferNotFoundError extends LedgerError {
  override readonly name = "PendingTransferNotFoundError";
  readonly code = "pending_transfer_not_found";
  constructor(readonly pendingId: string) {
    super(`no pending transfer ${pendingId}`);
  }
}

/** The pending transfer was already posted or voided, by another transfer id. */
export class PendingTransferResolvedError extends LedgerError {
  override readonly name = "PendingTransferResolvedError";
  readonly code = "pending_transfer_resolved";
  constructor(
    readonly pendingId: string,
    readonly state: "posted" | "voided",
  ) {
    super(`pending transfer ${pendingId} is already ${state}`);
  }
}

export class ExceedsPendingAmountError extends LedgerError {
  override readonly name = "ExceedsPendingAmountError";
  readonly code = "exceeds_pending_amount";
  constructor(
    readonly pendingId: string,
    readonly pendingAmount: bigint,
    readonly amount: bigint,
  ) {
    super(`cannot post ${amount} of pending transfer ${pendingId} for ${pendingAmount}`);
  }
}

/** The request itself is malformed (non-positive amount, same account twice, split not adding up). */
export class InvalidTransferError extends LedgerError {
  override readonly name = "InvalidTransferError";
  readonly code = "invalid_transfer";
}
