/**
 * The rules of `Idempotency-Key` that need no database: which keys are accepted, what makes two
 * requests "the same request", how long a key is kept and when a claim counts as abandoned. Pure.
 */
import { createHash } from "node:crypto";
import { ApiError } from "../core/index.ts";

/** The header's longest value, as Stripe's. */
export const MAX_KEY_LENGTH = 255;
/** A key is answered from its first request for this long; after it, the key names a new request. */
export const KEY_TTL_MS = 24 * 60 * 60 * 1000;
/**
 * A claim with no job and no outcome, untouched this long, was left by a node that stopped while
 * admitting its request (admission waits at most DEFAULT_QUEUE_WAIT_MS for a worker): the next
 * request with the key runs in its place.
 */
export const ABANDONED_CLAIM_MS = 2 * 60 * 1000;
/**
 * A first request whose job ended this long ago without recording its outcome never will: its
 * node stopped (a request records it within moments of its job's end, a stream once its last
 * bytes are written). The job's end, not the claim's age, starts the count, since recovery ends
 * an interrupted job only when its node restarts or its lease lapses.
 */
export const UNANSWERED_AFTER_MS = 2 * 60 * 1000;
/**
 * How long a retry waits for the first request with its key to finish before it is told to retry
 * (409 `idempotency_key_in_use` with retry-after): within the `openai` SDK's own patience, and
 * short enough that no connection is held open for an answer that may take minutes.
 */
export const WAIT_FOR_FIRST_MS = 30_000;

/** The key a request's header names, or undefined without one; throws invalid_request past MAX_KEY_LENGTH or empty. */
export function parseIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  if (Array.isArray(header)) throw new ApiError("invalid_request", "Send one Idempotency-Key header, not several.", "idempotency-key");
  if (header.length === 0) throw new ApiError("invalid_request", "The Idempotency-Key header is empty; send 1 to 255 characters, or no header.", "idempotency-key");
  if (header.length > MAX_KEY_LENGTH) {
    throw new ApiError("invalid_request", `The Idempotency-Key header is ${header.length} characters long; the limit is ${MAX_KEY_LENGTH}.`, "idempotency-key");
  }
  return header;
}

/**
 * JSON with every object's keys sorted and no whitespace: two bodies that parse to the same value
 * (key order, spacing, `1.0` and `1`, escapes) have the same canonical form; any other difference,
 * a field sent as `null` rather than left out included, gives another.
 */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.keys(value)
      .sort()
      .filter((k) => (value as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

/** What identifies a request under its key: the method and path (a job id included) and the canonical body, hashed. */
export function requestFingerprint(method: string, path: string, body: unknown): string {
  return createHash("sha256").update(`${method} ${path}\n${canonicalJson(body ?? null)}`).digest("hex");
}

export function keyReused(): ApiError {
  return new ApiError(
    "idempotency_key_reused",
    "This Idempotency-Key was already used with another request (another body or another path) in the last 24 hours; use a new key for a new request.",
    "idempotency-key",
  );
}

/**
 * The outcome of a key whose first request's job was charged but whose answer was lost with the
 * node that held it: the output is not kept, so it cannot be answered again; the job can be read.
 */
export function answerLost(jobId: string): ApiError {
  return new ApiError(
    "idempotency_answer_lost",
    `The first request with this Idempotency-Key ran as job ${jobId}, which finished and was charged, but the node serving it stopped before its answer was sent, and the output is not kept. GET /v1/jobs/${jobId} shows the job.`,
    "idempotency-key",
    { job_id: jobId },
  );
}

export function keyInUse(jobId: string | null): ApiError {
  return new ApiError(
    "idempotency_key_in_use",
    "The first request with this Idempotency-Key is still running; retry after a moment to receive its outcome.",
    "idempotency-key",
    { retry_after: 1, ...(jobId !== null ? { job_id: jobId } : {}) },
  );
}
