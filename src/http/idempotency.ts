/**
 * `Idempotency-Key` on the POST routes (docs/api.md "Idempotent requests"): a request with a key
 * claims it before it runs; a later one with the same key and body is answered with the first
 * one's stored outcome, marked `Idempotent-Replayed: true`, and runs nothing; another body is
 * refused. A request without the header costs nothing here: no statement, no allocation.
 */
import { setTimeout as sleep } from "node:timers/promises";
import type { FastifyReply, FastifyRequest } from "fastify";
import { ApiError, type ErrorCode } from "../core/index.ts";
import type { DocumentedHeader } from "./openapi.ts";
import {
  answerLost,
  type Claim,
  keyInUse,
  keyReused,
  type KeyRow,
  MAX_KEY_LENGTH,
  parseIdempotencyKey,
  requestFingerprint,
  UNANSWERED_AFTER_MS,
  WAIT_FOR_FIRST_MS,
} from "../idempotency/index.ts";

export const REPLAYED_HEADER = "idempotent-replayed";

/** The header as /v1/openapi.json documents it on the routes that read it. */
export const IDEMPOTENCY_KEY_HEADER: DocumentedHeader = {
  name: "Idempotency-Key",
  description: "The same key and body within 24 hours answer the first request's outcome, marked Idempotent-Replayed: true, and charge nothing more; another body under the key is refused (docs/api.md, Idempotent requests).",
  schema: { type: "string", minLength: 1, maxLength: MAX_KEY_LENGTH },
};

/** The stored keys, bound to the idempotency part by whoever assembles the service (src/ports.ts). */
export interface IdempotencyPort {
  claim(wallet: string, key: string, fingerprint: string): Promise<Claim>;
  read(wallet: string, key: string): Promise<KeyRow | undefined>;
  linkJob(wallet: string, key: string, claim: string, jobId: string): Promise<void>;
  record(wallet: string, key: string, claim: string, outcome: StoredOutcome): Promise<void>;
  release(wallet: string, key: string, claim: string): Promise<void>;
  /** When the wallet's job `jobId` ended and whether it was charged; undefined while it runs, or when it is not the wallet's. */
  jobEnded(wallet: string, jobId: string): Promise<{ endedAt: Date; charged: boolean } | undefined>;
  /** Claims anew a key whose first request started `jobId` and never answered; undefined when the row moved on. */
  reclaim(wallet: string, key: string, fingerprint: string, jobId: string): Promise<string | undefined>;
  /** Records the outcome of a key whose first request started `jobId` and never answered, unless one was recorded meanwhile. */
  recordUnanswered(wallet: string, key: string, jobId: string, outcome: StoredOutcome): Promise<void>;
  /** How long a retry waits for the first request before 409 (WAIT_FOR_FIRST_MS unless set). */
  waitForFirstMs?: number;
  /** Confirms an API key accepted from the cache (by hash): a replay spends nothing, so no admission confirms it. */
  confirmKey(keyHash: string): Promise<void>;
}

/** An ApiError as stored, to be thrown again on a replay. */
export interface StoredError {
  code: ErrorCode;
  message: string;
  param: string | null;
  details?: Record<string, unknown>;
}

/** What a request with a key answered, as a retry is answered with it. */
export type StoredOutcome =
  | { kind: "response"; headers: Record<string, string>; body: unknown }
  | { kind: "error"; headers: Record<string, string>; error: StoredError }
  | {
      kind: "stream";
      headers: Record<string, string>;
      jobId: string;
      created: number;
      model: string;
      includeUsage: boolean;
      content: string;
      finish: { finishReason: string; usage: { promptTokens: number; completionTokens: number } } | null;
      error: StoredError | null;
    };

/** The key a running request holds: it records the request's outcome, or lets the key go. */
export class HeldKey {
  constructor(
    private readonly port: IdempotencyPort,
    readonly wallet: string,
    readonly key: string,
    private readonly claim: string,
  ) {}

  linkJob(jobId: string): Promise<void> {
    return this.port.linkJob(this.wallet, this.key, this.claim, jobId);
  }

  record(outcome: StoredOutcome): Promise<void> {
    return this.port.record(this.wallet, this.key, this.claim, outcome);
  }

  release(): Promise<void> {
    return this.port.release(this.wallet, this.key, this.claim);
  }
}

export function storedError(error: unknown): StoredError {
  const apiError = error instanceof ApiError ? error : new ApiError("internal_error", "The service failed to handle this request. Retrying usually succeeds.");
  return { code: apiError.code, message: apiError.message, param: apiError.param, ...(apiError.details ? { details: apiError.details } : {}) };
}

export function apiErrorOf(stored: StoredError): ApiError {
  return new ApiError(stored.code, stored.message, stored.param, stored.details);
}

/**
 * Claims the key, or waits for the first request with it (up to WAIT_FOR_FIRST_MS, then 409
 * `idempotency_key_in_use` with retry-after) and returns its outcome; refuses another request
 * under the key with 422 `idempotency_key_reused`. A first request that will never answer, its
 * node gone, is settled by its job (`takeUnanswered`), once per retry.
 */
async function claimOrOutcome(port: IdempotencyPort, wallet: string, key: string, fingerprint: string): Promise<{ held: HeldKey } | { outcome: StoredOutcome }> {
  const deadline = Date.now() + (port.waitForFirstMs ?? WAIT_FOR_FIRST_MS);
  let row: KeyRow | undefined;
  let jobChecked = false;
  for (let pauseMs = 20; ; pauseMs = Math.min(pauseMs * 2, 500)) {
    if (row === undefined) {
      const claimed = await port.claim(wallet, key, fingerprint);
      if (claimed.claim !== undefined) return { held: new HeldKey(port, wallet, key, claimed.claim) };
      row = claimed.row;
    }
    if (row !== undefined) {
      if (row.fingerprint !== fingerprint) throw keyReused();
      if (row.outcome !== undefined) return { outcome: row.outcome as StoredOutcome };
      if (row.jobId !== null && !jobChecked) {
        jobChecked = true;
        const taken = await takeUnanswered(port, wallet, key, fingerprint, row.jobId);
        if (taken) return taken;
      }
    }
    if (Date.now() >= deadline) throw keyInUse(row?.jobId ?? null);
    await sleep(pauseMs);
    // Undefined when the first request let the key go meanwhile: this one then claims it.
    row = await port.read(wallet, key);
  }
}

/**
 * A key whose first request started `jobId`, which ended UNANSWERED_AFTER_MS ago with no outcome
 * recorded: that request's node stopped, and nobody will answer it. A job that charged nothing
 * leaves the key to this retry, which runs anew; a charged one's answer is lost with its node, and
 * the key answers that (answerLost) from now on. Undefined otherwise, and after recording: the
 * caller reads the row again.
 */
async function takeUnanswered(port: IdempotencyPort, wallet: string, key: string, fingerprint: string, jobId: string): Promise<{ held: HeldKey } | undefined> {
  const ended = await port.jobEnded(wallet, jobId);
  if (ended === undefined || Date.now() - ended.endedAt.getTime() < UNANSWERED_AFTER_MS) return undefined;
  if (ended.charged) {
    await port.recordUnanswered(wallet, key, jobId, { kind: "error", headers: { "x-svc-job-id": jobId }, error: storedError(answerLost(jobId)) });
    return undefined;
  }
  const claim = await port.reclaim(wallet, key, fingerprint, jobId);
  return claim === undefined ? undefined : { held: new HeldKey(port, wallet, key, claim) };
}

/** The path a key's request is fingerprinted with: the route's own, its parameters filled in, without the query. */
function pathOf(request: FastifyRequest): string {
  const url = request.url;
  const query = url.indexOf("?");
  return query < 0 ? url : url.slice(0, query);
}

/**
 * The key the request sends, claimed for it (`held`) or answered from the first request
 * (`outcome`); undefined without the header or without a port, at no cost.
 */
export async function takeKey(request: FastifyRequest, port: IdempotencyPort | undefined, wallet: string): Promise<{ held: HeldKey } | { outcome: StoredOutcome } | undefined> {
  const header = request.headers["idempotency-key"];
  if (header === undefined || port === undefined) return undefined;
  const key = parseIdempotencyKey(header)!;
  const taken = await claimOrOutcome(port, wallet, key, requestFingerprint(request.method, pathOf(request), request.body));
  // A key accepted from the cache is confirmed by a job's admission; a replay admits nothing.
  const toConfirm = request.owner?.keyToConfirm;
  if ("outcome" in taken && toConfirm !== undefined) await port.confirmKey(toConfirm);
  return taken;
}

/** Answers a JSON outcome again: its body, or its error thrown for the error handler to answer. */
export function replayJson(reply: FastifyReply, outcome: StoredOutcome): unknown {
  reply.headers({ ...outcome.headers, [REPLAYED_HEADER]: "true" });
  if (outcome.kind === "error") throw apiErrorOf(outcome.error);
  if (outcome.kind === "response") return outcome.body;
  throw new ApiError("internal_error", "The stored outcome of this Idempotency-Key is a stream; send the request as it was first sent.");
}

/**
 * A route that creates something (a dispute, a webhook) run under the request's key: its 200 is
 * stored and answered again; a refusal or failure stores nothing (nothing was created), so a
 * retry runs anew.
 */
export async function idempotently<T>(request: FastifyRequest, reply: FastifyReply, port: IdempotencyPort | undefined, wallet: string, run: () => Promise<T>): Promise<T | unknown> {
  const taken = await takeKey(request, port, wallet);
  if (taken === undefined) return run();
  if ("outcome" in taken) return replayJson(reply, taken.outcome);
  let body: T;
  try {
    body = await run();
  } catch (error) {
    await taken.held.release();
    throw error;
  }
  await taken.held.record({ kind: "response", headers: {}, body });
  return body;
}
