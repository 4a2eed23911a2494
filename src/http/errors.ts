/** Turning failures into the spec's error bodies; unknown failures become a 500 that leaks nothing. */
import type { FastifyError, FastifyInstance } from "fastify";
import { ApiError } from "../core/errors.ts";
import type { Logger } from "../core/logger.ts";

export function errorBody(error: ApiError, appUrl: string) {
  return error.toBody(appUrl);
}

/** Map errors raised by Fastify itself (body parsing, limits) onto the API's codes. */
function fromFastify(error: FastifyError): ApiError | undefined {
  switch (error.code) {
    case "FST_ERR_CTP_BODY_TOO_LARGE":
      return new ApiError("request_too_large", "The request body is larger than 4 MiB.");
    case "FST_ERR_CTP_EMPTY_JSON_BODY":
      return new ApiError("invalid_request", "The request body is empty; send a JSON object.", "body");
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

/** `appUrl` is read when an error is answered: it is only known once the server listens. */
export function installErrorHandling(app: FastifyInstance, ctx: { appUrl: string; logger: Logger }): void {
  const { logger } = ctx;
  app.setErrorHandler((error: FastifyError, request, reply) => {
    const apiError = error instanceof ApiError ? error : fromFastify(error);
    if (!apiError) {
      logger.error({ err: error, url: request.url, method: request.method }, "internal error");
      const internal = new ApiError("internal_error", "The service failed to handle this request. Retrying usually succeeds.");
      return reply.status(500).send(internal.toBody(ctx.appUrl));
    }
    if (apiError.code === "rate_limited" && apiError.details) reply.header("retry-after", String(apiError.details.retry_after));
    return reply.status(apiError.status).send(apiError.toBody(ctx.appUrl));
  });

  app.setNotFoundHandler((request, reply) => {
    const error = new ApiError("not_found", `No route matches ${request.method} ${request.url.split("?")[0]}.`);
    return reply.status(404).send(error.toBody(ctx.appUrl));
  });
}
