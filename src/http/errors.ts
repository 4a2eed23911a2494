/** Turning failures into the spec's error bodies; unknown failures become a 500 that leaks nothing. */
import type { FastifyError, FastifyInstance } from "fastify";
import { ApiError, type Logger } from "../core/index.ts";
import { answerUnrouted, type RouteTable } from "./edge.ts";
import { schemaError, type SchemaError } from "./schema-errors.ts";

export function errorBody(error: ApiError, appUrl: string) {
  return error.toBody(appUrl);
}

/** Map errors raised by Fastify itself (body parsing, limits, schemas) onto the API's codes. */
export function fromFastify(error: FastifyError): ApiError | undefined {
  // A body, query or path that parsed but does not match the route's schema: name the field.
  if (error.validation) return schemaError(error.validation as SchemaError[], error.validationContext);
  switch (error.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new ApiError("request_too_large", "The request body is larger than 4 MiB.");
    case "FST_ERR_CTP_INVALID_MEDIA_TYPE":
      return new ApiError("invalid_request", "Send the body as JSON with 'Content-Type: application/json'.", "body");
    case "FST_ERR_CTP_INVALID_CONTENT_LENGTH":
      return new ApiError("invalid_request", "The Content-Length header does not match the body.", "body");
  }
  if (error instanceof SyntaxError || error.statusCode === 400) {
    return new ApiError("invalid_request", "The request body is not valid JSON.", "body");
  }
  return undefined;
}

/** Every 429 and 503, and a 409 for a key still in use, says when to retry, as a header and (where the error has it) in details. */
function retryAfterSeconds(error: ApiError): number {
  const seconds = error.details?.retry_after;
  return typeof seconds === "number" && Number.isFinite(seconds) && seconds > 0 ? Math.ceil(seconds) : 1;
}

/** `appUrl` is read when an error is answered: it is only known once the server listens. */
export function installErrorHandling(app: FastifyInstance, ctx: { appUrl: string; logger: Logger }, routes: RouteTable): void {
  const { logger } = ctx;
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const apiError = error instanceof ApiError ? error : fromFastify(error);
    if (!apiError) {
      logger.error({ err: error, request_id: request.id, url: request.url, method: request.method }, "internal error");
      const internal = new ApiError("internal_error", "The service failed to handle this request. Retrying usually succeeds.");
      return reply.status(500).send(internal.toBody(ctx.appUrl));
    }
    if (apiError.status === 429 || apiError.status === 503 || apiError.code === "idempotency_key_in_use") reply.header("retry-after", String(retryAfterSeconds(apiError)));
    // The spec sends the balance on every completion's response, the 402 that refuses one too.
    const remaining = apiError.details?.credits_remaining;
    if (typeof remaining === "number") reply.header("x-svc-credits-remaining", String(remaining));
    return reply.status(apiError.status).send(apiError.toBody(ctx.appUrl));
  });

  app.setNotFoundHandler((request, reply) => answerUnrouted(routes, request, reply, ctx.appUrl));
}
