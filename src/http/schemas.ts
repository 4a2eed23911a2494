/**
 * JSON schemas of the API's bodies, shared by the routes (validation, response serialization) and
 * by the OpenAPI document (components). A route names a shared one as `{ $ref: "Job#" }`.
 *
 * Response objects allow further properties: a schema documents a body, it must never drop a field
 * that the code returns (fast-json-stringify writes only what the schema lists, unless told not to).
 * Optional request fields also take `null`, which the service reads as "not given", as OpenAI does.
 */
import type { FastifyInstance } from "fastify";
import { ERROR_CODES, MAX_MESSAGES, MAX_STOP_SEQUENCES, MAX_TOKENS, PENALTY_RANGE, SEED_RANGE, TEMPERATURE_RANGE, TOP_P_RANGE } from "../core/index.ts";
import { EVENT_NAMES } from "../events/index.ts";
import { JOB_STATUSES } from "../jobs/index.ts";

/** A reference to a shared schema by its `$id`. */
export const ref = (id: string) => ({ $ref: `${id}#` });

export const str = { type: "string" } as const;
export const int = { type: "integer" } as const;
export const maybe = (type: string) => ({ type: [type, "null"] });
export const timestamp = { type: ["string", "null"], description: "ISO 8601 UTC timestamp" } as const;

/** An object schema listing its fields (all required unless said), open to further ones. */
export function object(properties: Record<string, unknown>, required = Object.keys(properties), description?: string) {
  return { type: "object", properties, required, additionalProperties: true, ...(description ? { description } : {}) };
}

const ErrorBody = {
  $id: "ErrorBody",
  description: "Every failure's body (docs/errors.md).",
  ...object({
    error: object(
      {
        code: { type: "string", enum: Object.keys(ERROR_CODES) },
        message: str,
        type: str,
        param: { ...maybe("string"), description: "The request field at fault, or null." },
        docs: str,
        details: { type: "object", additionalProperties: true },
      },
      ["code", "message", "type", "param", "docs"],
    ),
  }),
};

const Usage = object({ prompt_tokens: int, completion_tokens: int, total_tokens: int });

const Job = {
  $id: "Job",
  ...object({
    id: str,
    object: { const: "job" },
    status: { type: "string", enum: [...JOB_STATUSES] },
    model: str,
    tier: str,
    credits_charged: int,
    usdc_value: { type: "number" },
    worker_address: maybe("string"),
    created_at: timestamp,
    completed_at: timestamp,
    on_chain: object({
      escrow_tx: maybe("string"),
      settlement_tx: maybe("string"),
      escrow_address: maybe("string"),
      slot: maybe("integer"),
      proof_hash: maybe("string"),
      refund_tx: maybe("string"),
      receipt: {
        description: "Only for a job kept in an escrow table: null until its settlement is recorded, then its receipt for `svc verify --receipt` (docs/api.md)",
        anyOf: [
          { type: "null" },
          object({
            table: str,
            slot: { type: "integer" },
            leaf_index: { type: "integer" },
            tree_size: { type: "integer" },
            path: { type: "array", items: str },
            prompt_tokens: { type: "integer" },
            completion_tokens: { type: "integer" },
            proof_hash: str,
            escrow_tx: str,
            settlement_tx: str,
          }),
        ],
      },
    }, ["escrow_tx", "settlement_tx", "escrow_address", "slot", "proof_hash", "refund_tx"]),
    usage: Usage,
    dispute: {
      description: "null until the caller disputes the job; then the dispute and, once arbitrated, its outcome",
      anyOf: [
        { type: "null" },
        object({
          your_hash: str,
          worker_hash: maybe("string"),
          dispute_tx: str,
          opened_at: maybe("string"),
          outcome: { type: ["string", "null"], enum: ["upheld", "rejected", "inconclusive", null] },
          resolve_tx: maybe("string"),
          credits_returned: maybe("integer"),
          bond_credits: maybe("integer"),
        }),
      ],
    },
  }),
};

const JobList = {
  $id: "JobList",
  ...object({ object: { const: "list" }, data: { type: "array", items: ref("Job") }, has_more: { type: "boolean" }, next_cursor: maybe("string") }),
};

const Model = {
  $id: "Model",
  ...object({
    id: str,
    object: { const: "model" },
    created: int,
    owned_by: str,
    svc: object({
      tier: str,
      credits_per_request: int,
      credits_per_1k_tokens: int,
      active_workers: int,
      median_latency_ms: { ...int, description: "p50 time to first token (a worker's join probe is its first sample); 0 until one is measured" },
      parameters: str,
      context_window: int,
      retires_at: { ...timestamp, description: "ISO 8601 UTC timestamp: the announced retirement, after which the model is refused; null when none is announced" },
      retirement_reason: { ...maybe("string"), description: "Why the model is retired; null when no retirement is announced" },
    }),
  }),
};

const ModelList = { $id: "ModelList", ...object({ object: { const: "list" }, data: { type: "array", items: ref("Model") } }) };

const Account = {
  $id: "Account",
  ...object({ wallet: str, credits_remaining: int, usdc_value: { type: "number" }, last_topup_at: timestamp, api_key_created_at: timestamp }),
};

const Webhook = {
  $id: "Webhook",
  ...object({
    id: str,
    object: { const: "webhook" },
    url: str,
    events: { type: "array", items: str },
    created_at: timestamp,
    status: { type: "string", enum: ["active", "failed"] },
  }),
};

const WebhookList = { $id: "WebhookList", ...object({ object: { const: "list" }, data: { type: "array", items: ref("Webhook") } }) };
const WebhookDeleted = { $id: "WebhookDeleted", ...object({ id: str, object: { const: "webhook" }, deleted: { const: true } }) };

export const MIN_SECRET_LENGTH = 16;
export const MAX_SECRET_LENGTH = 512;

const WebhookInput = {
  $id: "WebhookInput",
  type: "object",
  required: ["url", "events", "secret"],
  properties: {
    url: { type: "string", minLength: 1, description: "the HTTPS endpoint that receives deliveries" },
    events: { type: "array", minItems: 1, items: { type: "string", enum: [...EVENT_NAMES] }, description: "a non-empty array of event names" },
    secret: { type: "string", minLength: MIN_SECRET_LENGTH, maxLength: MAX_SECRET_LENGTH, description: `the signing secret, a string of ${MIN_SECRET_LENGTH} to ${MAX_SECRET_LENGTH} characters (never returned)` },
  },
};

const ChatMessage = {
  $id: "ChatMessage",
  type: "object",
  required: ["role", "content"],
  properties: {
    role: { type: "string", enum: ["system", "user", "assistant"] },
    content: {
      anyOf: [str, { type: "array", description: "Content parts (such as images): planned, refused for now." }],
    },
  },
};

const range = ({ min, max }: { min: number; max: number }, type: string) => ({ type: [type, "null"], minimum: min, maximum: max });

const ChatCompletionRequest = {
  $id: "ChatCompletionRequest",
  type: "object",
  required: ["model", "messages"],
  properties: {
    model: { type: "string", minLength: 1 },
    messages: { type: "array", minItems: 1, maxItems: MAX_MESSAGES, items: ref("ChatMessage") },
    stream: { ...maybe("boolean"), description: "Default false; true answers with server-sent events." },
    stream_options: { type: ["object", "null"], properties: { include_usage: maybe("boolean") } },
    max_tokens: range({ min: 1, max: MAX_TOKENS }, "integer"),
    max_completion_tokens: { ...range({ min: 1, max: MAX_TOKENS }, "integer"), description: "The newer name of max_tokens." },
    temperature: { ...range(TEMPERATURE_RANGE, "number"), description: "Default 1." },
    top_p: { ...range(TOP_P_RANGE, "number"), description: "Default 1." },
    stop: { anyOf: [str, { type: "array", maxItems: MAX_STOP_SEQUENCES, items: str }, { type: "null" }] },
    frequency_penalty: { ...range(PENALTY_RANGE, "number"), description: "Default 0." },
    presence_penalty: { ...range(PENALTY_RANGE, "number"), description: "Default 0." },
    seed: range(SEED_RANGE, "integer"),
    n: { ...maybe("integer"), description: "Only 1; several choices are planned." },
  },
};

const ChatCompletion = {
  $id: "ChatCompletion",
  description: "With `stream: true`, server-sent events of `chat.completion.chunk` objects ending with `data: [DONE]`.",
  ...object({
    id: str,
    object: { const: "chat.completion" },
    created: int,
    model: str,
    choices: {
      type: "array",
      items: object({
        index: int,
        message: object({ role: { const: "assistant" }, content: str }),
        logprobs: { type: "null" },
        finish_reason: str,
      }),
    },
    usage: Usage,
  }),
};

export const SHARED_SCHEMAS = [
  ErrorBody,
  Job,
  JobList,
  Model,
  ModelList,
  Account,
  Webhook,
  WebhookList,
  WebhookDeleted,
  WebhookInput,
  ChatMessage,
  ChatCompletionRequest,
  ChatCompletion,
];

export function addSharedSchemas(app: FastifyInstance): void {
  for (const schema of SHARED_SCHEMAS) app.addSchema(schema);
}

/** The error answers a route documents besides its success: the spec's error body for any 4xx and 5xx. */
export const ERROR_RESPONSES = { "4xx": ref("ErrorBody"), "5xx": ref("ErrorBody") } as const;

/** A path parameter that is one id. */
export const idParams = (name = "id") => ({ type: "object", required: [name], properties: { [name]: str } });
