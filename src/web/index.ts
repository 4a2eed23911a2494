/**
 * The wallet owner's web app, server side: the page at `/` and its API under /app/api, which
 * takes a wallet session (Sign In With Solana, then a cookie) and never an API key.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import type { HttpContext } from "../http/context.ts";
import { registerJobs } from "../http/routes/jobs.ts";
import { registerAccountRoutes } from "./account-routes.ts";
import { registerAppPage } from "./bundle.ts";
import type { WebContext, WebOptions } from "./context.ts";
import { guardAppRequests, registerSessionRoutes } from "./session-routes.ts";
import { registerWebhookRoutes } from "./webhook-routes.ts";

/** `checkRequest`: the HTTP edge's own checks (path parameters), run after the session guard. */
export async function registerWebApp(app: FastifyInstance, http: HttpContext, options: WebOptions, checkRequest?: (request: FastifyRequest) => void): Promise<void> {
  const web: WebContext = { http, options };
  registerAppPage(app);
  await app.register(
    async (api) => {
      api.decorateRequest("appWallet", "");
      guardAppRequests(api, web);
      if (checkRequest) api.addHook("preHandler", async (request) => checkRequest(request));
      registerSessionRoutes(api, web);
      registerAccountRoutes(api, http.db);
      registerJobs(api, http, (request) => request.appWallet);
      registerWebhookRoutes(api, http.webhooks);
    },
    { prefix: "/app/api" },
  );
}

export { appBundle } from "./bundle.ts";
export { WEB_MIGRATIONS } from "./schema.ts";
export { SESSION_COOKIE } from "./session-routes.ts";
export { formatSignInMessage, parseSignInMessage, SIGN_IN_STATEMENT, type SignInFields } from "./siws-message.ts";
export type { WebOptions } from "./context.ts";
