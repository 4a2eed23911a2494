/**
 * Checks every message that arrives over the worker protocol before anything acts on it. Either
 * side may be buggy or hostile; a message that is not exactly what protocol.ts describes is a
 * ProtocolError. The gateway closes a worker's connection over it; a worker fails only the job or
 * count an unreadable message names (its gateway may just be newer), and closes only when it cannot
 * tell what the message was about.
 */
import { MAX_TOKENS, SEED_RANGE } from "../core/index.ts";
import type { ChatMessage, GenerationRequest } from "../inference/index.ts";
import { MAX_SETTLEMENT_JOBS, MAX_WORKER_MESSAGE_BYTES, type GatewayMessage, type ModelOffer, type WorkerMessage } from "./protocol.ts";

export class ProtocolError extends Error {
  constructor(
    message: string,
    /** The job or count the unreadable message was about, when its id could be read: only that one fails. */
    readonly about?: { jobId: string } | { requestId: number },
  ) {
    super(message);
    this.name = "ProtocolError";
  }
}

/** A message whose `type` this side does not know (the other side may be a newer version). */
export class UnknownMessageError extends ProtocolError {}

/** Runs `parse`; a failure is tied to the job or count the message names, so the receiver can fail just that. */
function concerning<T>(about: { jobId: string } | { requestId: number }, parse: () => T): T {
  try {
    return parse();
  } catch (error) {
    if (error instanceof ProtocolError && error.about === undefined) throw new ProtocolError(error.message, about);
    throw error;
  }
}

const MAX_MODELS = 64;
const MAX_ID = 256;
const MAX_MESSAGE_TEXT = 4096;
const ROLES = new Set(["system", "user", "assistant"]);

type Fields = Record<string, unknown>;

function object(value: unknown, what: string): Fields {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw new ProtocolError(`${what} must be an object`);
  return value as Fields;
}

function string(fields: Fields, key: string, max: number, what = key): string {
  const value = fields[key];
  if (typeof value !== "string") throw new ProtocolError(`${what} must be a string`);
  if (value.length > max) throw new ProtocolError(`${what} is longer than ${max} characters`);
  return value;
}

function nonEmpty(fields: Fields, key: string, max: number): string {
  const value = string(fields, key, max);
  if (value.length === 0) throw new ProtocolError(`${key} must not be empty`);
  return value;
}

function integer(fields: Fields, key: string, min: number, max: number, what = key): number {
  const value = fields[key];
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new ProtocolError(`${what} must be an integer from ${min} to ${max}`);
  }
  return value;
}

function number(fields: Fields, key: string, min: number, max: number): number {
  const value = fields[key];
  if (typeof value !== "number" || !Number.isFinite(value) || value < min || value > max) {
    throw new ProtocolError(`${key} must be a number from ${min} to ${max}`);
  }
  return value;
}

function boolean(fields: Fields, key: string): boolean {
  const value = fields[key];
  if (typeof value !== "boolean") throw new ProtocolError(`${key} must be true or false`);
  return value;
}

function array(fields: Fields, key: string, max: number): unknown[] {
  const value = fields[key];
  if (!Array.isArray(value)) throw new ProtocolError(`${key} must be an array`);
  if (value.length > max) throw new ProtocolError(`${key} has more than ${max} entries`);
  return value;
}

/** Base64 (standard or url-safe) decoding to exactly `size` bytes. */
function bytes(fields: Fields, key: string, size: number): string {
  const value = string(fields, key, 4 * Math.ceil(size / 3) + 4);
  if (!/^[A-Za-z0-9+/_-]*={0,2}$/.test(value) || Buffer.from(value, "base64").length !== size) {
    throw new ProtocolError(`${key} must be ${size} bytes in base64`);
  }
  return value;
}

function parseJson(data: string): Fields {
  let value: unknown;
  try {
    value = JSON.parse(data);
  } catch {
    throw new ProtocolError("a message must be JSON");
  }
  const message = object(value, "a message");
  if (typeof message.type !== "string") throw new ProtocolError("a message needs a string 'type'");
  return message;
}

function modelOffers(fields: Fields): ModelOffer[] {
  return array(fields, "models", MAX_MODELS).map((entry, i) => {
    const model = object(entry, `models[${i}]`);
    return {
      id: string(model, "id", MAX_ID, `models[${i}].id`),
      contextWindow: integer(model, "contextWindow", 1, MAX_TOKENS, `models[${i}].contextWindow`),
    };
  });
}

function chatMessages(fields: Fields, key: string): ChatMessage[] {
  // The gateway admits at most 2,048 messages per request.
  return array(fields, key, 2048).map((entry, i) => {
    const message = object(entry, `${key}[${i}]`);
    const role = message.role;
    if (typeof role !== "string" || !ROLES.has(role)) throw new ProtocolError(`${key}[${i}].role must be system, user or assistant`);
    if (typeof message.content !== "string") throw new ProtocolError(`${key}[${i}].content must be a string`);
    return { role: role as ChatMessage["role"], content: message.content };
  });
}

function generationRequest(value: unknown): GenerationRequest {
  const r = object(value, "request");
  const stop = array(r, "stop", 16).map((s, i) => {
    if (typeof s !== "string") throw new ProtocolError(`stop[${i}] must be a string`);
    return s;
  });
  const request: GenerationRequest = {
    messages: chatMessages(r, "messages"),
    maxTokens: integer(r, "maxTokens", 1, MAX_TOKENS),
    temperature: number(r, "temperature", 0, 2),
    topP: number(r, "topP", 0, 1),
    stop,
    frequencyPenalty: number(r, "frequencyPenalty", -2, 2),
    presencePenalty: number(r, "presencePenalty", -2, 2),
  };
  if (r.seed !== undefined) request.seed = integer(r, "seed", SEED_RANGE.min, SEED_RANGE.max);
  return request;
}

/** What a gateway receives from a worker. */
export function parseWorkerMessage(data: string): WorkerMessage {
  const m = parseJson(data);
  switch (m.type) {
    case "hello":
      return {
        type: "hello",
        protocol: integer(m, "protocol", 0, 1_000_000),
        address: nonEmpty(m, "address", 64),
        signature: bytes(m, "signature", 64),
        models: modelOffers(m),
        concurrency: integer(m, "concurrency", 1, 1024),
      };
    case "delta":
      return { type: "delta", jobId: nonEmpty(m, "jobId", MAX_ID), text: string(m, "text", MAX_WORKER_MESSAGE_BYTES) };
    case "done": {
      const finishReason = m.finishReason;
      if (finishReason !== "stop" && finishReason !== "length" && finishReason !== "cancelled") {
        throw new ProtocolError("finishReason must be stop, length or cancelled");
      }
      const usage = object(m.usage, "usage");
      const outputHash = string(m, "outputHash", 80);
      if (!/^sha256:[0-9a-f]{64}$/.test(outputHash)) throw new ProtocolError("outputHash must be sha256:<64 hex digits>");
      return {
        type: "done",
        jobId: nonEmpty(m, "jobId", MAX_ID),
        finishReason,
        usage: {
          promptTokens: integer(usage, "promptTokens", 0, MAX_TOKENS, "usage.promptTokens"),
          completionTokens: integer(usage, "completionTokens", 0, MAX_TOKENS, "usage.completionTokens"),
        },
        outputHash,
        signature: bytes(m, "signature", 64),
        ...(m.text !== undefined ? { text: string(m, "text", MAX_WORKER_MESSAGE_BYTES) } : {}),
      };
    }
    case "job_error": {
      const fault = m.fault;
      if (fault !== undefined && fault !== "request" && fault !== "worker") throw new ProtocolError("fault must be request or worker");
      return { type: "job_error", jobId: nonEmpty(m, "jobId", MAX_ID), message: string(m, "message", MAX_MESSAGE_TEXT), ...(fault ? { fault } : {}) };
    }
    case "count_result":
      return { type: "count_result", requestId: integer(m, "requestId", 1, Number.MAX_SAFE_INTEGER), tokens: integer(m, "tokens", 0, MAX_TOKENS) };
    case "count_error":
      return { type: "count_error", requestId: integer(m, "requestId", 1, Number.MAX_SAFE_INTEGER), message: string(m, "message", MAX_MESSAGE_TEXT) };
    case "settlement_signature":
      return { type: "settlement_signature", requestId: integer(m, "requestId", 1, Number.MAX_SAFE_INTEGER), signature: bytes(m, "signature", 64) };
    case "settlement_error":
      return { type: "settlement_error", requestId: integer(m, "requestId", 1, Number.MAX_SAFE_INTEGER), message: string(m, "message", MAX_MESSAGE_TEXT) };
    case "drain":
      return { type: "drain" };
    case "heartbeat":
      return { type: "heartbeat" };
    default:
      throw new UnknownMessageError(`unknown message type ${JSON.stringify(m.type).slice(0, 40)}`);
  }
}

function settlementJobs(fields: Fields): Extract<GatewayMessage, { type: "sign_settlement" }>["jobs"] {
  const jobs = array(fields, "jobs", MAX_SETTLEMENT_JOBS).map((entry, i) => {
    const job = object(entry, `jobs[${i}]`);
    const charge = string(job, "charge", 20, `jobs[${i}].charge`);
    if (!/^\d{1,20}$/.test(charge) || BigInt(charge) >= 2n ** 64n) throw new ProtocolError(`jobs[${i}].charge must be a whole number below 2^64`);
    return {
      jobId: nonEmpty(job, "jobId", MAX_ID),
      slot: integer(job, "slot", 0, 254, `jobs[${i}].slot`),
      charge,
      promptTokens: integer(job, "promptTokens", 0, MAX_TOKENS, `jobs[${i}].promptTokens`),
      completionTokens: integer(job, "completionTokens", 0, MAX_TOKENS, `jobs[${i}].completionTokens`),
    };
  });
  if (jobs.length === 0) throw new ProtocolError("jobs must not be empty");
  return jobs;
}

/** What a worker receives from a gateway. */
export function parseGatewayMessage(data: string): GatewayMessage {
  const m = parseJson(data);
  switch (m.type) {
    case "challenge":
      return {
        type: "challenge",
        protocol: integer(m, "protocol", 0, 1_000_000),
        challenge: nonEmpty(m, "challenge", 256),
        heartbeatIntervalMs: integer(m, "heartbeatIntervalMs", 10, 3_600_000),
        heartbeatTimeoutMs: integer(m, "heartbeatTimeoutMs", 10, 3_600_000),
      };
    case "registered":
    case "refused": {
      const refused = array(m, "refused", MAX_MODELS).map((entry, i) => {
        const r = object(entry, `refused[${i}]`);
        return { id: string(r, "id", MAX_ID), reason: string(r, "reason", MAX_MESSAGE_TEXT) };
      });
      if (m.type === "refused") return { type: "refused", reason: string(m, "reason", MAX_MESSAGE_TEXT), refused };
      return { type: "registered", address: nonEmpty(m, "address", 64), models: modelOffers(m), refused };
    }
    case "job": {
      const jobId = nonEmpty(m, "jobId", MAX_ID);
      return concerning({ jobId }, () => {
        const job: Extract<GatewayMessage, { type: "job" }> = { type: "job", jobId, model: nonEmpty(m, "model", MAX_ID), request: generationRequest(m.request) };
        if (m.stream !== undefined) job.stream = boolean(m, "stream");
        return job;
      });
    }
    case "cancel":
      return { type: "cancel", jobId: nonEmpty(m, "jobId", MAX_ID), reason: string(m, "reason", MAX_MESSAGE_TEXT) };
    case "count": {
      const requestId = integer(m, "requestId", 1, Number.MAX_SAFE_INTEGER);
      return concerning({ requestId }, () => ({ type: "count", requestId, model: nonEmpty(m, "model", MAX_ID), messages: chatMessages(m, "messages") }));
    }
    case "settled": {
      const earned = string(m, "earnedBaseUnits", 40);
      if (!/^\d+$/.test(earned)) throw new ProtocolError("earnedBaseUnits must be a whole number in decimal");
      return { type: "settled", jobId: nonEmpty(m, "jobId", MAX_ID), earnedBaseUnits: earned, settlementTx: nonEmpty(m, "settlementTx", 128) };
    }
    case "sign_settlement": {
      const requestId = integer(m, "requestId", 1, Number.MAX_SAFE_INTEGER);
      return concerning({ requestId }, () => ({ type: "sign_settlement", requestId, table: nonEmpty(m, "table", 64), jobs: settlementJobs(m) }));
    }
    case "heartbeat":
      return { type: "heartbeat" };
    default:
      throw new UnknownMessageError(`unknown message type ${JSON.stringify(m.type).slice(0, 40)}`);
  }
}
