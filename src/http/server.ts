/**
 * The public HTTP surface: Fastify with the `/v1` routes, the per-IP burst limit, API-key
 * authentication, the spec's error bodies, request ids, CORS and request logs (edge.ts). The web
 * app mounts its page and `/app/api` routes onto the same server (src/service.ts wires it).
 */
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from "fastify";
import { ApiError, BoundedMap, RateLimiter } from "../core/index.ts";
import type { HttpContext, KeyOwner } from "./context.ts";
import { answerClientError, requestIdFor, routerError, RouteTable, setEdgeHeaders } from "./edge.ts";
import { installErrorHandling } from "./errors.ts";
import { logWhenClosed } from "./request-log.ts";
import { installRequestSpans } from "./request-span.ts";
import { API_PREFIX, type RegisteredRoute } from "./openapi.ts";
import { accountRoutes } from "./routes/account.ts";
import { chatCompletionRoutes } from "./routes/chat-completions.ts";
import { errorDocRoutes } from "./routes/error-docs.ts";
import { healthRoutes } from "./routes/health.ts";
import { disputeRoutes } from "./routes/disputes.ts";
import { jobRoutes } from "./routes/jobs.ts";
import { modelRoutes } from "./routes/models.ts";
import { openApiRoute } from "./routes/openapi.ts";
import { webhookRoutes } from "./routes/webhooks.ts";
import { addSharedSchemas } from "./schemas.ts";

export const BODY_LIMIT_BYTES = 4 * 1024 * 1024;
/**
 * A request's headers and body must arrive within this, or it is answered 408 and its connection
 * closed: a largest body at 140 KB/s. Streamed answers are not bounded by it.
 */
export const REQUEST_TIMEOUT_MS = 30_000;
/** The headers alone, within this (or the request timeout if it is shorter). */
const HEADERS_TIMEOUT_MS = 10_000;
/**
 * Request bodies one address may send, in bytes: reading, parsing and checking a body runs on the
 * paid API's event loop even when the request is then refused, so their size is bounded per
 * address beside their number. Several large prompts a second fit; a stream of 3 MB refusals does not.
 */
export const BODY_BYTES_PER_ADDRESS = { ratePerSecond: 4 * 1024 * 1024, burst: 16 * 1024 * 1024 };
/**
 * Requests one address may have refused (a malformed or unauthorised request, an unknown path):
 * refusing reads, parses and checks each one on the paid API's event loop and charges nothing.
 * Past the burst, the address is answered 429 before its requests are read, until the bucket refills.
 */
export const REFUSALS_PER_ADDRESS = { ratePerSecond: 5, burst: 20 };
const REFUSED_STATUSES = new Set([400, 401, 403, 404, 405, 413, 415, 422, 431]);
/** Addresses remembered as refused too often; the oldest is forgotten first. */
const MAX_BLOCKED_ADDRESSES = 100_000;

/**
 * Fastify's ajv as the routes' schemas need it. A JSON body is validated as sent: "1" is not the
 * number 1. `verbose` gives each error its schema and value, from which schema-errors.ts words
 * the message.
 */
export const AJV_OPTIONS = { customOptions: { coerceTypes: false, verbose: true, allowUnionTypes: true } } as const;

/** What a route's `config` may say about it to the hooks here. */
interface RouteFlags {
  /** Open without an API key. */
  public?: boolean;
  /** Not counted by the per-IP limit. */
  rateLimited?: boolean;
  /** Spends only through a job's admission, which confirms a key accepted from the cache (HttpPorts.authenticate). */
  keyConfirmedAtAdmission?: boolean;
}

function routeFlags(request: FastifyRequest): RouteFlags {
  return (request.routeOptions.config as RouteFlags | undefined) ?? {};
}

function isPublic(request: FastifyRequest): boolean {
  return routeFlags(request).public === true;
}

/** Text a path parameter holds that no id, model or webhook can have, and the database cannot store (NUL). */
const UNNAMEABLE = /[\u0000-\u001f\u007f]/;

/** Path parameters that cannot name anything answer 404 before any lookup. */
export function checkParams(request: FastifyRequest): void {
  for (const [name, value] of Object.entries((request.params ?? {}) as Record<string, unknown>)) {
    if (typeof value === "string" && UNNAMEABLE.test(value)) throw new ApiError("not_found", `Nothing has this ${name === "*" ? "model id" : name}.`);
  }
}

/** The one Authorization header; two are ambiguous, so neither is used. */
function soleAuthorization(request: FastifyRequest): string | undefined {
  const raw = request.raw.rawHeaders;
  let count = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.toLowerCase() === "authorization") count++;
  if (count > 1) throw new ApiError("invalid_request", "Send one Authorization header, not several.", "authorization");
  return request.headers.authorization;
}

/**
 * JSON bodies, and none at all: a request without a body is accepted whatever its Content-Type
 * (clients send `application/json` on every request, DELETE included). Any other body is refused.
 */
function installBodyParsers(app: FastifyInstance): void {
  const json = app.getDefaultJsonParser("error", "error");
  app.removeAllContentTypeParsers();
  app.addContentTypeParser("application/json", { parseAs: "string" }, (request, body, done) => {
    if (body === "") return done(null, undefined);
    json(request, body as string, done);
  });
  app.addContentTypeParser("*", { parseAs: "buffer" }, (_request, body, done) => {
    if ((body as Buffer).length === 0) return done(null, undefined);
    done(new ApiError("invalid_request", "Send the body as JSON with 'Content-Type: application/json'.", "body"), undefined);
  });
}

/**
 * The per-address limits, checked before a body is read: requests (DECISIONS: 50/s, burst 100 by
 * default), the bytes their bodies declare (BODY_BYTES_PER_ADDRESS), and the requests refused
 * (REFUSALS_PER_ADDRESS).
 */
function installRateLimits(app: FastifyInstance, ctx: HttpContext): void {
  if (ctx.rateLimit === false) return;
  const requests = new RateLimiter(ctx.rateLimit);
  const bodyBytes = new RateLimiter(BODY_BYTES_PER_ADDRESS);
  const refusalLimit = ctx.refusalLimit ?? REFUSALS_PER_ADDRESS;
  const refusals = refusalLimit === false ? undefined : new RateLimiter(refusalLimit);
  const blockedUntilMs = new BoundedMap<number>(MAX_BLOCKED_ADDRESSES);
  app.addHook("onResponse", async (request, reply) => {
    if (!refusals || !REFUSED_STATUSES.has(reply.statusCode)) return;
    const waitS = refusals.take(request.ip);
    if (waitS > 0) blockedUntilMs.set(request.ip, Date.now() + waitS * 1000);
  });
  app.addHook("onRequest", async (request) => {
    if (routeFlags(request).rateLimited === false) return;
    const blockedMs = (blockedUntilMs.get(request.ip) ?? 0) - Date.now();
    if (blockedMs > 0) {
      throw new ApiError("rate_limited", "Too many of this address's requests were refused; fix them, then retry.", null, { retry_after: Math.ceil(blockedMs / 1000) });
    }
    const retryAfter = requests.take(request.ip);
    if (retryAfter > 0) {
      throw new ApiError("rate_limited", "Too many requests from this address; slow down.", null, { retry_after: retryAfter });
    }
    const declared = Math.min(Number(request.headers["content-length"]) || 0, BODY_LIMIT_BYTES);
    const bytesAfter = declared > 0 ? bodyBytes.take(request.ip, Date.now(), declared) : 0;
    if (bytesAfter > 0) {
      throw new ApiError("rate_limited", `This address has sent more than ${BODY_BYTES_PER_ADDRESS.ratePerSecond / 1024 / 1024} MiB of request bodies a second; slow down.`, null, { retry_after: bytesAfter });
    }
  });
}

/**
 * The gateway's HTTP server with its edge, /v1 and the error docs; `mountOthers` then adds what
 * else shares the origin (the web app), so this part does not depend on the parts it serves.
 */
export async function buildServer(ctx: HttpContext, mountOthers?: (app: FastifyInstance) => Promise<void>): Promise<FastifyInstance> {
  const requestTimeoutMs = ctx.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  const app = Fastify({
    // The service logs through its own pino logger (ctx.logger); Fastify's per-request logs are noise here.
    logger: false,
    bodyLimit: BODY_LIMIT_BYTES,
    // Node checks its timeouts every 30 s by default, which let a slow client hold a connection that much longer.
    http: { headersTimeout: Math.min(HEADERS_TIMEOUT_MS, requestTimeoutMs), connectionsCheckingInterval: 1_000 },
    requestTimeout: requestTimeoutMs,
    ...(ctx.trustProxy?.length ? { trustProxy: ctx.trustProxy } : {}),
    // Model ids hold a slash; keep the router from treating encoded ones specially.
    routerOptions: { ignoreTrailingSlash: true },
    genReqId: requestIdFor,
    frameworkErrors: (error, request, reply) => {
      setEdgeHeaders(request as FastifyRequest, reply as FastifyReply);
      const apiError = routerError(error);
      return (reply as FastifyReply).status(apiError.status).send(apiError.toBody(ctx.appUrl));
    },
    clientErrorHandler: (error, socket) => answerClientError(error, socket, ctx.appUrl),
    ajv: AJV_OPTIONS,
  });
  const routes = new RouteTable();
  const registered: RegisteredRoute[] = [];
  app.addHook("onRoute", (route) => {
    routes.add(route.url, route.method);
    registered.push(route);
  });
  installErrorHandling(app, ctx, routes);
  installBodyParsers(app);
  addSharedSchemas(app);

  // First, so that a request's span covers all the others' work.
  installRequestSpans(app);
  app.addHook("onRequest", async (request, reply) => {
    setEdgeHeaders(request, reply);
    logWhenClosed(ctx.logger, request, reply, ctx.answered);
  });
  installRateLimits(app, ctx);

  // Pages outside /v1: the error reference the API links to (service.ts mounts the web app's own).
  await app.register(errorDocRoutes);
  await app.register(healthRoutes, { probes: ctx.readiness, logger: ctx.logger });

  await app.register(
    async (v1) => {
      v1.decorateRequest("owner", undefined as unknown as KeyOwner);
      v1.decorateRequest("completion", undefined);
      v1.addHook("preHandler", async (request) => {
        if (!isPublic(request)) request.owner = await ctx.ports.authenticate(soleAuthorization(request), routeFlags(request).keyConfirmedAtAdmission === true);
        checkParams(request);
      });
      await v1.register(chatCompletionRoutes, { startJob: (owner, chat, signal) => ctx.jobs.start(owner, chat, signal), appUrl: () => ctx.appUrl, idempotency: ctx.ports.idempotency });
      await v1.register(modelRoutes, { catalog: ctx.catalog, pool: ctx.pool });
      await v1.register(accountRoutes, ctx.ports.account);
      await v1.register(jobRoutes, ctx.ports.jobs);
      await v1.register(disputeRoutes, ctx.ports.disputes);
      await v1.register(webhookRoutes, ctx.ports.webhooks);
      await v1.register(openApiRoute, { routes: registered });
    },
    { prefix: API_PREFIX },
  );

  await mountOthers?.(app);
  return app;
}
