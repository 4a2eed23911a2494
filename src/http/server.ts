/**
 * The public HTTP surface: Fastify with the `/v1` routes, the per-IP burst limit, API-key
 * authentication, the spec's error bodies and 404/405/413 handling; and the web app's `/app/api`
 * routes, authenticated by wallet sessions instead of API keys.
 */
import Fastify, { type FastifyInstance, type FastifyRequest } from "fastify";
import { authenticate } from "../accounts/accounts.ts";
import { ApiError } from "../core/errors.ts";
import type { HttpContext } from "./context.ts";
import { installErrorHandling } from "./errors.ts";
import { RateLimiter } from "./rate-limit.ts";
import { registerAccount } from "./routes/account.ts";
import { registerChatCompletions } from "./routes/chat-completions.ts";
import { registerErrorDocs } from "./routes/error-docs.ts";
import { registerJobs } from "./routes/jobs.ts";
import { registerModels } from "./routes/models.ts";
import { registerAppSession, requireAppSession } from "./routes/app-session.ts";
import { registerAppWebhooks } from "./routes/app-webhooks.ts";
import { registerWebhooks } from "./routes/webhooks.ts";

export const BODY_LIMIT_BYTES = 4 * 1024 * 1024;

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

type Methods = Record<string, (typeof METHODS)[number][]>;

/** The routes of /v1 and their methods; any other method on these paths is a 405. */
const ROUTES: Methods = {
  "/chat/completions": ["POST"],
  "/models": ["GET"],
  "/models/*": ["GET"],
  "/account": ["GET"],
  "/jobs": ["GET"],
  "/jobs/:id": ["GET"],
  "/webhooks": ["GET", "POST"],
  "/webhooks/:id": ["DELETE"],
};

/** The web app's API under /app/api (wallet sessions, never API keys), likewise. */
const APP_ROUTES: Methods = {
  "/session/challenge": ["POST"],
  "/session": ["POST"],
  "/webhooks/:id/deliveries": ["GET"],
  "/webhooks/:id/replay": ["POST"],
};

/** Any method a path does not take answers 405 with an Allow header. */
function methodNotAllowed(scope: FastifyInstance, routes: Methods): void {
  for (const [url, allowed] of Object.entries(routes)) {
    const others = METHODS.filter((m) => !allowed.includes(m));
    scope.route({
      method: others,
      url,
      config: { public: true },
      handler: async (request, reply) => {
        reply.header("allow", allowed.join(", "));
        throw new ApiError("method_not_allowed", `${request.method} is not allowed here; use ${allowed.join(" or ")}.`);
      },
    });
  }
}

function isPublic(request: FastifyRequest): boolean {
  return Boolean(request.routeOptions.config && (request.routeOptions.config as { public?: boolean }).public);
}

export async function buildServer(ctx: HttpContext): Promise<FastifyInstance> {
  const app = Fastify({
    // The service logs through its own pino logger (ctx.logger); Fastify's per-request logs are noise here.
    logger: false,
    bodyLimit: BODY_LIMIT_BYTES,
    // Model ids hold a slash; keep the router from treating encoded ones specially.
    routerOptions: { ignoreTrailingSlash: true },
  });
  installErrorHandling(app, ctx);

  const limiter = new RateLimiter(ctx.rateLimit);
  app.addHook("onRequest", async (request) => {
    const retryAfter = limiter.take(request.ip);
    if (retryAfter > 0) {
      throw new ApiError("rate_limited", "Too many requests from this address; slow down.", null, { retry_after: retryAfter });
    }
  });

  // The web app's pages live at the root; for now that is the error reference the API links to.
  registerErrorDocs(app);

  await app.register(
    async (v1) => {
      v1.decorateRequest("owner", undefined as unknown as { wallet: string; keyCreatedAt: Date });
      v1.addHook("preHandler", async (request) => {
        if (isPublic(request)) return;
        request.owner = await authenticate(ctx.db, request.headers.authorization);
      });
      registerChatCompletions(v1, ctx);
      registerModels(v1, ctx);
      registerAccount(v1, ctx);
      registerJobs(v1, ctx);
      registerWebhooks(v1, ctx.webhooks);
      methodNotAllowed(v1, ROUTES);
    },
    { prefix: "/v1" },
  );

  // The web app's API: wallet sessions, never API keys (a key cannot change account settings).
  const { webhooks } = ctx;
  await app.register(
    async (web) => {
      web.decorateRequest("appWallet", "");
      web.addHook("preHandler", async (request) => {
        if (!isPublic(request)) await requireAppSession(webhooks, request);
      });
      registerAppSession(web, webhooks, () => ctx.appUrl);
      registerAppWebhooks(web, webhooks);
      methodNotAllowed(web, APP_ROUTES);
    },
    { prefix: "/app/api" },
  );
  return app;
}
