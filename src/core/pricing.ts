/**
 * Pricing and escrow rules (spec "Pricing tiers" and "Charging rules", settled in DECISIONS.md).
 * Pure: no I/O. All amounts are whole credits.
 */

export type Tier = "lite" | "standard" | "pro" | "max";

export interface TierRates {
  /** Flat cost covering the first FLAT_RATE_TOKENS output tokens. */
  creditsPerRequest: number;
  /** Rate per 1,000 output tokens beyond the flat allowance. */
  creditsPer1kTokens: number;
}

export const TIERS: Record<Tier, TierRates> = {
  lite: { creditsPerRequest: 2, creditsPer1kTokens: 1 },
  standard: { creditsPerRequest: 8, creditsPer1kTokens: 4 },
  pro: { creditsPerRequest: 18, creditsPer1kTokens: 9 },
  max: { creditsPerRequest: 40, creditsPer1kTokens: 20 },
};

export const TIER_NAMES = Object.keys(TIERS) as Tier[];

/** Output tokens covered by the flat per-request rate. */
export const FLAT_RATE_TOKENS = 500;

/** Largest completion the escrow estimate assumes when the caller gives no max_tokens. */
export const DEFAULT_COMPLETION_CAP = 4096;

/** cost(n) = F + ceil(max(0, n - 500) * R / 1000); monotonic in n. */
export function completionCost(rates: TierRates, outputTokens: number): number {
  const beyond = Math.max(0, outputTokens - FLAT_RATE_TOKENS);
  return rates.creditsPerRequest + Math.ceil((beyond * rates.creditsPer1kTokens) / 1000);
}

/** The largest number of output tokens whose cost fits in `credits` (0 when even the flat rate does not). */
export function maxTokensAffordable(rates: TierRates, credits: number): number {
  if (credits < rates.creditsPerRequest) return 0;
  if (rates.creditsPer1kTokens === 0) return Number.MAX_SAFE_INTEGER;
  return FLAT_RATE_TOKENS + Math.floor(((credits - rates.creditsPerRequest) * 1000) / rates.creditsPer1kTokens);
}

export type EscrowPlan =
  | { ok: true; lockCredits: number; maxTokens: number }
  | { ok: false; creditsRequired: number };

/**
 * How much to lock in escrow at arrival and how many tokens the job may then generate.
 * With max_tokens: lock cost(max_tokens). Without: lock min(available, cost(cap)) where
 * cap = min(4096, context_window - prompt_tokens), and generation stops where cost reaches the lock.
 */
export function planEscrow(input: {
  rates: TierRates;
  availableCredits: number;
  maxTokens: number | undefined;
  promptTokens: number;
  contextWindow: number;
}): EscrowPlan {
  const { rates, availableCredits } = input;
  if (input.maxTokens !== undefined) {
    const required = completionCost(rates, input.maxTokens);
    if (availableCredits < required) return { ok: false, creditsRequired: required };
    return { ok: true, lockCredits: required, maxTokens: input.maxTokens };
  }
  const cap = Math.max(0, Math.min(DEFAULT_COMPLETION_CAP, input.contextWindow - input.promptTokens));
  const lockCredits = Math.min(availableCredits, completionCost(rates, cap));
  if (lockCredits < rates.creditsPerRequest) return { ok: false, creditsRequired: rates.creditsPerRequest };
  return { ok: true, lockCredits, maxTokens: Math.min(cap, maxTokensAffordable(rates, lockCredits)) };
}
