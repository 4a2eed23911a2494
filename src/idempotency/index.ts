/** The idempotency part's public surface: `Idempotency-Key`'s rules and its stored keys. */
export { type Claim, IdempotencyKeys, type KeyRow } from "./key-store.ts";
export {
  ABANDONED_CLAIM_MS,
  answerLost,
  canonicalJson,
  KEY_TTL_MS,
  keyInUse,
  keyReused,
  MAX_KEY_LENGTH,
  parseIdempotencyKey,
  requestFingerprint,
  UNANSWERED_AFTER_MS,
  WAIT_FOR_FIRST_MS,
} from "./rules.ts";
export { IDEMPOTENCY_MIGRATIONS } from "./schema.ts";
