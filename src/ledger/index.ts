/**
 * The credit ledger: the only code that changes a balance. Double-entry in the style of
 * TigerBeetle: accounts keep four running totals (debits/credits, pending/posted), transfers are
 * immutable rows with caller-chosen ids, and value is reserved with a pending transfer that is
 * later posted (in part or whole) or voided. Amounts are USDC base units (core/units.ts).
 *
 * Every operation takes a Db. Given a plain Db it is atomic on its own; given a transaction
 * handle it runs in a savepoint of that transaction, so a caller can write its own rows and the
 * ledger's in one commit, and a refused operation leaves the caller's transaction usable.
 * A retried operation with the same id returns `status: "exists"` and applies nothing.
 * Each operation locks its accounts (in id order) in its last statement, and a transaction holds
 * them until it commits: keep ledger operations at the end of a caller's transaction, and know
 * that on PostgreSQL two caller transactions that each run several operations can still deadlock
 * (SQLSTATE 40P01, one of them fails and may be retried).
 *
 * Accounts (./accounts.ts): `wallet:<address>` (limited: never debited past its credits),
 * `escrow:<address>` (its open reservations), `worker:<address>` (earnings), and the shared
 * `treasury` and `funding` (deposits come from it, withdrawals return to it).
 *
 *   deposit     transfer funding -> wallet:<a>, code "deposit"
 *   reserve     pending wallet:<a> -> escrow:<a>                      reserve()
 *   settle      post it + escrow:<a> -> worker:<w>, -> treasury       settle()
 *               or: post it first (resolveAll), pay out later          payOutAll()
 *   returned    escrow:<a> -> wallet:<a>, a posted charge not paid out  returnCharge()
 *   no output   voidPending on the reservation
 *   withdraw    pending wallet:<a> -> funding while the chain transaction is in flight,
 *               then post (confirmed) or void (failed)
 */
export {
  ensureAccount,
  ensureWalletAccounts,
  ensureWorkerAccount,
  escrowAccountId,
  FUNDING_ACCOUNT,
  getAccount,
  getAccounts,
  TREASURY_ACCOUNT,
  walletAccountId,
  walletAddresses,
  workerAccountId,
} from "./accounts.ts";
export type { EnsureAccountInput } from "./accounts.ts";
export {
  AccountConflictError,
  AccountNotFoundError,
  ExceedsCreditsError,
  ExceedsPendingAmountError,
  InvalidTransferError,
  LedgerError,
  PendingTransferNotFoundError,
  PendingTransferResolvedError,
  TransferIdConflictError,
} from "./errors.ts";
export { checkInvariants } from "./invariants.ts";
export type { Invariant, InvariantViolation } from "./invariants.ts";
export { postPending, resolveAll, voidPending } from "./pending.ts";
export type { Payout, PostPendingInput, Resolution, Resolved, VoidPendingInput } from "./pending.ts";
export { LEDGER_MIGRATIONS } from "./schema.ts";
export { ledgerTotals } from "./totals.ts";
export type { CodeTotals } from "./totals.ts";
export { payOutAll, reserve, reserveAll, reservedTransfer, returnCharge, settle } from "./settle.ts";
export type { NewTransfer } from "./apply.ts";
export type { PayOutInput, ReserveInput, SettleInput } from "./settle.ts";
export { getTransfer, getTransfers, listTransfers, transfer } from "./transfers.ts";
export type { TransferFilter, TransferInput } from "./transfers.ts";
export type { Account, AccountCode, PendingState, Transfer, TransferCode, TransferKind, TransferResult } from "./types.ts";
