/** The http part's public surface: what other parts import from it. */
export type { HttpContext, HttpPorts, KeyOwner } from "./context.ts";
export type { IdempotencyPort } from "./idempotency.ts";
export type { Answered } from "./request-log.ts";
export type { AccountRoutesOptions } from "./routes/account.ts";
export { jobRoutes } from "./routes/jobs.ts";
export { modelRoutes, type ModelRoutesOptions } from "./routes/models.ts";
export { streamJob } from "./routes/chat-completions.ts";
export { parseChatRequest, type ChatCompletionBody } from "./chat-request.ts";
export type { DisputeRoutesOptions } from "./routes/disputes.ts";
export type { JobRoutesOptions } from "./routes/jobs.ts";
export { webhookRoutes } from "./routes/webhooks.ts";
export type { WebhookInput, WebhookRoutesOptions } from "./routes/webhooks.ts";
export { ERROR_RESPONSES, idParams, int, maybe, object, ref, str, timestamp } from "./schemas.ts";
export { buildServer, checkParams } from "./server.ts";
