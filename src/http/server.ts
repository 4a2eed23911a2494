/**
 * The public HTTP surface: Fastify with the `/v1` routes, the per-IP burst limit, API-key
 * authentication, the spec's error bodies and 404/405/413 handling.
 */
import Fastify, { type FastifyInstance } from "fastify";
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

export const BODY_LIMIT_BYTES = 4 * 1024 * 1024;

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

/** The routes of /v1 and their methods; any other method on these paths is a 405. */
const ROUTES: Record<string, (typeof METHODS)[number][]> = {
  "/chat/completions": ["POST"],
  "/models": ["GET"],
  "/models/*": ["GET"],
  "/account": ["GET"],
  "/jobs": ["GET"],
  "/jobs/:id": ["GET"],
};

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
        if (request.routeOptions.config && (request.routeOptions.config as { public?: boolean }).public) return;
        request.owner = await authenticate(ctx.db, request.headers.authorization);
      });
      registerChatCompletions(v1, ctx);
      registerModels(v1, ctx);
      registerAccount(v1, ctx);
      registerJobs(v1, ctx);
      for (const [url, allowed] of Object.entries(ROUTES)) {
        const others = METHODS.filter((m) => !allowed.includes(m));
        v1.route({
          method: others,
          url,
          config: { public: true },
          handler: async (request, reply) => {
            reply.header("allow", allowed.join(", "));
            throw new ApiError("method_not_allowed", `${request.method} is not allowed here; use ${allowed.join(" or ")}.`);
          },
        });
      }
    },
    { prefix: "/v1" },
  );
  return app;
}
