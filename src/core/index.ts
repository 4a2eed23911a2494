/** The core part's public surface: what other parts import from it. */
export { base58Decode, base58Encode } from "./base58.ts";
export { BoundedMap } from "./bounded-map.ts";
export { Channel } from "./channel.ts";
export { ApiError, ERROR_CODES, insufficientCredits } from "./errors.ts";
export { idBody, isId, newId } from "./ids.ts";
export { LOG_FORMATS, createLogger, defaultLogFormat, silentLogger } from "./logger.ts";
export type { LogFormat, Logger } from "./logger.ts";
export { MIN_ACTIVE_STAKE, STAKED_WORKER_SHARE_BPS, WORKER_SHARE_BPS, splitPayout } from "./payout.ts";
export { TIERS, completionCost, planEscrow } from "./pricing.ts";
export type { Tier } from "./pricing.ts";
export { outputHash, proofMessage, proofVerifies } from "./proof.ts";
export { MAX_MESSAGES, MAX_STOP_SEQUENCES, MAX_TOKENS, PENALTY_RANGE, SEED_RANGE, TEMPERATURE_RANGE, TOP_P_RANGE } from "./request-limits.ts";
export { NATIVE_DECIMALS, USDC_DECIMALS, baseUnitsToCredits, creditsToBaseUnits, usdcValue } from "./units.ts";
export { generateKeypair, keypairFromSecretKey, loadOrCreateKeypair, publicKeyOf, readKeypair, verifyEd25519 } from "./keys.ts";
export type { Keypair, Signer } from "./keys.ts";
export { DEFAULT_RATE_LIMIT, RateLimiter, TokenBucket, parseRateLimit } from "./rate-limit.ts";
export type { RateLimitOptions } from "./rate-limit.ts";
export { ANSWER_BEFORE_CONFIRM_MARGIN_MS, DISPUTE_WINDOW_MS, JOB_TIMEOUT_MS } from "./job-clocks.ts";
