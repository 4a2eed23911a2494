/**
 * The worker protocol: JSON text messages over a WebSocket that the worker dials out to, so
 * workers behind NAT need no open port. docs/workers.md describes the conversation; this file is
 * its vocabulary. Validation of what arrives lives in protocol-parse.ts.
 */
import type { ChatMessage, GenerationRequest, StopReason, Usage } from "../inference/index.ts";

export const PROTOCOL_VERSION = 1;

/** Where a gateway accepts worker connections, on its HTTP server's port. */
export const WORKER_CONNECT_PATH = "/v1/workers/connect";

export const DEFAULT_HEARTBEAT_TIMEOUT_MS = 15_000;

/** Largest message a worker may send: deltas and proofs are small; a prompt only travels the other way. */
export const MAX_WORKER_MESSAGE_BYTES = 1 << 20;
/** Largest message a gateway may send: a job's prompt can be a 4 MiB request body and then some. */
export const MAX_GATEWAY_MESSAGE_BYTES = 64 << 20;
/** Either side cuts off a peer that has not answered its close frame after this. */
export const CLOSE_GRACE_MS = 2_000;
/**
 * A worker holds the output of a job sent with `stream: false` for at most this long before it
 * sends what it has: the gateway still sees the job is alive, and a fast upstream's tokens go in
 * one message rather than one each.
 */
export const HELD_OUTPUT_MS = 100;
/** ...or until it holds this many characters of it. */
export const HELD_OUTPUT_CHARS = 64 << 10;
/** Jobs one settlement request may name: a table's slots are numbered 0-254. */
export const MAX_SETTLEMENT_JOBS = 255;

/**
 * WebSocket close codes. The 44xx codes mirror the HTTP status of the same meaning. Reconnecting
 * cannot help after the fatal ones: the worker (its key, its models, its software) must change.
 */
export const CloseCode = {
  normal: 1000,
  goingAway: 1001,
  internalError: 1011,
  malformed: 4400,
  badSignature: 4401,
  noAcceptableModel: 4403,
  timeout: 4408,
  replaced: 4409,
  /** It failed the probe job, or failed or stalled too many callers' jobs in a row. */
  unfit: 4422,
  unsupportedProtocol: 4426,
  /** It sent more messages (or bytes) than a worker's connection is allowed. */
  tooManyMessages: 4429,
  /** Its subnet already has as many workers on probation as it may; it may try again later. */
  subnetOnProbation: 4430,
} as const;

export const FATAL_CLOSE_CODES: ReadonlySet<number> = new Set([
  CloseCode.malformed,
  CloseCode.badSignature,
  CloseCode.noAcceptableModel,
  CloseCode.replaced,
  CloseCode.unsupportedProtocol,
]);

/** A model a worker offers, with the context window its engine actually provides. */
export interface ModelOffer {
  id: string;
  contextWindow: number;
}

export interface RefusedModel {
  id: string;
  reason: string;
}

export type JobFault = "request" | "worker";

/** Gateway to worker. */
export type GatewayMessage =
  | {
      type: "challenge";
      protocol: number;
      /** 32 random bytes, base64url; signed in the hello (see authMessage). */
      challenge: string;
      /** How often the worker must send a heartbeat; the gateway sends its own as often. */
      heartbeatIntervalMs: number;
      /** Silence after which either side gives the other up. */
      heartbeatTimeoutMs: number;
    }
  | { type: "registered"; address: string; models: ModelOffer[]; refused: RefusedModel[] }
  /** Sent just before a refusal closes the connection, with the full reasons a close frame cannot hold. */
  | { type: "refused"; reason: string; refused: RefusedModel[] }
  /**
   * `stream: false` when the caller reads the output only at its end (a JSON reply): the worker
   * may then send it in fewer, larger pieces (see HELD_OUTPUT_MS), the last one in the `done`.
   */
  | { type: "job"; jobId: string; model: string; request: GenerationRequest; stream?: boolean }
  /**
   * Stop generating, and answer with a `done` whose finishReason is "cancelled" and whose proof
   * covers exactly the deltas sent (or a `job_error` when there were none). The gateway charges
   * that partial output when the job's caller left; after a timeout it no longer listens.
   */
  | { type: "cancel"; jobId: string; reason: string }
  | { type: "count"; requestId: number; model: string; messages: ChatMessage[] }
  /** The job's settlement confirmed on-chain; `earnedBaseUnits` is the worker's payout (6-decimal USDC units). */
  | { type: "settled"; jobId: string; earnedBaseUnits: string; settlementTx: string }
  /**
   * Sign the settlement of these jobs of an escrow table (base58): answered with
   * `settlement_signature` (base64 Ed25519 over settlementMessage) or `settlement_error`.
   * Charges are decimal USDC base units.
   */
  | { type: "sign_settlement"; requestId: number; table: string; jobs: { jobId: string; slot: number; charge: string; promptTokens: number; completionTokens: number }[] }
  | { type: "heartbeat" };

/** Worker to gateway. */
export type WorkerMessage =
  | {
      type: "hello";
      protocol: number;
      /** Base58 of the worker's Ed25519 public key: its on-chain address. */
      address: string;
      /** Base64 Ed25519 signature over authMessage(gateway host, challenge). */
      signature: string;
      models: ModelOffer[];
      /** Jobs the worker runs at once; the gateway routes elsewhere while it is full. */
      concurrency: number;
    }
  | { type: "delta"; jobId: string; text: string }
  | {
      type: "done";
      jobId: string;
      /** "cancelled" answers a cancel: the proof covers the output sent before it. */
      finishReason: StopReason;
      usage: Usage;
      /** `sha256:<hex>` of the output as the worker produced it. */
      outputHash: string;
      /** Base64 Ed25519 signature over `<job id>:<outputHash>`. */
      signature: string;
      /** The output's last piece, when the worker held it back rather than send it as a delta. */
      text?: string;
    }
  /**
   * `fault` says whose fault the failure is: `request` when the job cannot run as given (the
   * worker could not read it, or it does not fit), so no other worker is tried; `worker` (the
   * default) for the worker's own trouble, after which the job may move to another worker.
   */
  | { type: "job_error"; jobId: string; message: string; fault?: JobFault }
  | { type: "count_result"; requestId: number; tokens: number }
  | { type: "count_error"; requestId: number; message: string }
  | { type: "settlement_signature"; requestId: number; signature: string }
  | { type: "settlement_error"; requestId: number; message: string }
  /** The worker is shutting down: send it no more jobs; the running ones still finish. */
  | { type: "drain" }
  | { type: "heartbeat" };

export function encode(message: GatewayMessage | WorkerMessage): string {
  return JSON.stringify(message);
}

/** The gateway's WebSocket URL for an origin such as `http://127.0.0.1:8080` (any path is ignored). */
export function connectUrl(gateway: string): URL {
  const url = new URL(gateway);
  if (url.protocol === "http:") url.protocol = "ws:";
  else if (url.protocol === "https:") url.protocol = "wss:";
  else if (url.protocol !== "ws:" && url.protocol !== "wss:") throw new TypeError(`a gateway is an http(s) URL, got ${gateway}`);
  url.pathname = WORKER_CONNECT_PATH;
  url.search = "";
  url.hash = "";
  return url;
}

/** A close frame's reason is at most 123 bytes of UTF-8. */
export function closeReason(text: string): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= 123) return text;
  return bytes.subarray(0, 120).toString("utf8").replace(/\uFFFD$/, "") + "...";
}
