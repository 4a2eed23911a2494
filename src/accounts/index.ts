/** The accounts part's public surface: what other parts import from it. */
export * as accounts from "./accounts.ts";
export { addCreditLowSides, authenticate, confirmKeys, ensureWallet, getWallet, hasApiKey, issueApiKey, lockCreditLowSides, recordCreditLowSide, recordTopup } from "./accounts.ts";
export type { CreditLowSides, Wallet } from "./accounts.ts";
export { refuseSuspendedWallet, reinstateWalletKey, suspendWalletKey } from "./accounts.ts";
export type { LiveKeyState } from "./accounts.ts";
export { ApiKeyCache } from "./api-key-cache.ts";
export type { KeyOwner } from "./api-key-cache.ts";
export { ACCOUNTS_MIGRATIONS } from "./schema.ts";
