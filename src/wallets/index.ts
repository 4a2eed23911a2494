/**
 * A wallet's funding: its balance and the credit.low rule, deposits from its own USDC (signed by
 * the wallet, by Solana Pay, or granted in development), withdrawals back to it, and moving
 * credits an earlier version kept in custodial accounts. What a job does with credits is the
 * jobs part's.
 */
export { availableAfter, availableCredits, checkCreditLow, toCredits } from "./balance.ts";
export { CreditBook, type CreditChange } from "./credit-book.ts";
export { moveCustodialCredits } from "./custodial-upgrade.ts";
export { Deposits } from "./deposits.ts";
export { deposit, recentDeposits } from "./funding.ts";
export { MIN_DEPOSIT_CREDITS, WalletPayments } from "./wallet-payments.ts";
export type { PayRequestState, PreparedPayment, SentPayment } from "./wallet-payments.ts";
