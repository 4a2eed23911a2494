/** The accounts part's public surface: what other parts import from it. */
export * as accounts from "./accounts.ts";
export { authenticate, confirmKeys, ensureWallet, getWallet, hasApiKey, issueApiKey, recordCreditLowSide, recordCreditLowSides, recordTopup } from "./accounts.ts";
export type { Wallet } from "./accounts.ts";
export { ApiKeyCache } from "./api-key-cache.ts";
export type { KeyOwner } from "./api-key-cache.ts";
export { ACCOUNTS_MIGRATIONS } from "./schema.ts";
