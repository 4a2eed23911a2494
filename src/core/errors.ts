/**
 * The API's error object (spec "Errors", types settled in DECISIONS.md). Every failure the HTTP
 * layer answers is an ApiError; anything else becomes a 500 `internal_error` that leaks nothing.
 */

export type ErrorCode =
  | "invalid_api_key"
  | "missing_api_key"
  | "key_suspended"
  | "insufficient_credits"
  | "model_not_found"
  | "no_workers_available"
  | "job_timeout"
  | "invalid_request"
  | "context_length_exceeded"
  | "dispute_window_expired"
  | "not_found"
  | "method_not_allowed"
  | "conflict"
  | "idempotency_key_reused"
  | "idempotency_key_in_use"
  | "idempotency_answer_lost"
  | "request_too_large"
  | "headers_too_large"
  | "request_timeout"
  | "rate_limited"
  | "internal_error";

interface CodeInfo {
  status: number;
  type: string;
}

export const ERROR_CODES: Record<ErrorCode, CodeInfo> = {
  invalid_api_key: { status: 401, type: "authentication_error" },
  missing_api_key: { status: 401, type: "authentication_error" },
  key_suspended: { status: 403, type: "permission_error" },
  insufficient_credits: { status: 402, type: "payment_error" },
  model_not_found: { status: 400, type: "invalid_request_error" },
  no_workers_available: { status: 503, type: "capacity_error" },
  job_timeout: { status: 504, type: "timeout_error" },
  invalid_request: { status: 400, type: "invalid_request_error" },
  context_length_exceeded: { status: 400, type: "invalid_request_error" },
  dispute_window_expired: { status: 422, type: "invalid_request_error" },
  not_found: { status: 404, type: "invalid_request_error" },
  method_not_allowed: { status: 405, type: "invalid_request_error" },
  conflict: { status: 409, type: "invalid_request_error" },
  idempotency_key_reused: { status: 422, type: "invalid_request_error" },
  idempotency_key_in_use: { status: 409, type: "invalid_request_error" },
  idempotency_answer_lost: { status: 500, type: "api_error" },
  request_too_large: { status: 413, type: "invalid_request_error" },
  headers_too_large: { status: 431, type: "invalid_request_error" },
  request_timeout: { status: 408, type: "invalid_request_error" },
  rate_limited: { status: 429, type: "rate_limit_error" },
  internal_error: { status: 500, type: "api_error" },
};

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly param: string | null = null,
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
    this.name = "ApiError";
    this.status = ERROR_CODES[code].status;
  }

  /** The JSON body the spec defines: `{ error: { code, message, type, param, docs, details? } }`. */
  toBody(appUrl: string): { error: Record<string, unknown> } {
    const error: Record<string, unknown> = {
      code: this.code,
      message: this.message,
      type: ERROR_CODES[this.code].type,
      param: this.param,
      docs: `${appUrl}/docs/errors#${this.code}`,
    };
    if (this.details !== undefined) error.details = this.details;
    return { error };
  }
}

export function insufficientCredits(creditsRemaining: number, creditsRequired: number, tier: string): ApiError {
  return new ApiError(
    "insufficient_credits",
    `This request needs ${creditsRequired} credits and the wallet has ${creditsRemaining}.`,
    null,
    { credits_remaining: creditsRemaining, credits_required: creditsRequired, tier },
  );
}
