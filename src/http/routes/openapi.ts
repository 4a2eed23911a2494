/**
 * GET /v1/openapi.json: the OpenAPI 3.1 document of /v1, built on its first request, once every
 * route is registered. Public and outside the burst limit, like the health endpoints: client
 * generators and documentation tools fetch it freely.
 */
import type { FastifyInstance } from "fastify";
import { API_VERSION } from "../../events/index.ts";
import { openApiDocument, type RegisteredRoute } from "../openapi.ts";
import { SHARED_SCHEMAS } from "../schemas.ts";

export interface OpenApiRouteOptions {
  /** The routes as registered, filled in by the server's onRoute hook. */
  routes: readonly RegisteredRoute[];
}

export async function openApiRoute(app: FastifyInstance, { routes }: OpenApiRouteOptions): Promise<void> {
  let document: string | undefined;
  const config = { public: true, rateLimited: false };
  app.get("/openapi.json", { config }, async (_request, reply) => {
    // The document's version is the API's, as webhook payloads name it.
    document ??= JSON.stringify(openApiDocument([...routes], SHARED_SCHEMAS, API_VERSION));
    return reply.type("application/json; charset=utf-8").send(document);
  });
}
