/** The http part's public surface: what other parts import from it. */
export type { HttpContext } from "./context.ts";
export { jobsPort, webhooksPort } from "./ports.ts";
export { jobRoutes } from "./routes/jobs.ts";
export { webhookRoutes } from "./routes/webhooks.ts";
export type { WebhookRoutesOptions } from "./routes/webhooks.ts";
export { ERROR_RESPONSES, idParams, int, maybe, object, ref, str, when } from "./schemas.ts";
export { buildServer, checkParams } from "./server.ts";
