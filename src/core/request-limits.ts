/**
 * The ranges a generation request's numbers must fall in, shared by the two places that check
 * them: the API's request parser and the worker protocol's parser. A value the API accepts must
 * be one every later stage accepts too, or a caller could send a job no worker can read.
 */

/** Seeds are carried as JSON numbers, which hold integers exactly only up to 2^53 - 1. */
export const SEED_RANGE = { min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER } as const;

/**
 * The most tokens a request may ask for or a context window may hold: far above any model's
 * window, so a request is refused by its model's context window first (context_length_exceeded),
 * and absurd numbers are refused before they reach pricing or a worker.
 */
export const MAX_TOKENS = 10_000_000;

export const TEMPERATURE_RANGE = { min: 0, max: 2 } as const;
export const TOP_P_RANGE = { min: 0, max: 1 } as const;
export const PENALTY_RANGE = { min: -2, max: 2 } as const;

/** Messages per request: the API refuses more, the protocol carries no more. */
export const MAX_MESSAGES = 2048;
/** Stop sequences per request (OpenAI's limit); the protocol carries up to 16. */
export const MAX_STOP_SEQUENCES = 4;
