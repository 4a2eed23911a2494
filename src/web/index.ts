/**
 * The wallet owner's web app, server side: the page at `/` and its API under /app/api, which
 * takes a wallet session (Sign In With Solana, then a cookie) and never an API key. Here the
 * app's route groups are given the functions they need, bound to the service's database.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { accounts } from "../accounts/index.ts";
import { DELIVERY_STATUSES, deliveryToApi, getWebhook, listDeliveries, replayFailed, wakeDelivery, webhookToApi, type DeliveryStatus } from "../events/index.ts";
import { type HttpContext, jobRoutes, jobsPort, webhooksPort } from "../http/index.ts";
import { money } from "../jobs/index.ts";
import type { Db } from "../store/index.ts";
import { accountPageRoutes, type AccountPageOptions } from "./account-routes.ts";
import { registerAppPage } from "./bundle.ts";
import type { SessionStore, WebContext, WebOptions } from "./context.ts";
import { guardAppRequests, sessionRoutes } from "./session-routes.ts";
import * as sessions from "./sessions.ts";
import { webhookPageRoutes, type WebhookPageOptions } from "./webhook-routes.ts";

function sessionStore(db: Db): SessionStore {
  return {
    issueNonce: (now) => sessions.issueNonce(db, now),
    useNonce: (nonce) => sessions.useNonce(db, nonce),
    openSession: (wallet, ttlMs) => sessions.openSession(db, wallet, ttlMs),
    sessionWallet: (token) => sessions.sessionWallet(db, token),
    closeSession: (token) => sessions.closeSession(db, token),
  };
}

function accountPage(db: Db): AccountPageOptions {
  return {
    getWallet: (wallet) => accounts.getWallet(db, wallet),
    availableCredits: (wallet) => money.availableCredits(db, wallet),
    apiKeyCreatedAt: (wallet) => accounts.apiKeyCreatedAt(db, wallet),
    recentDeposits: (wallet, limit) => money.recentDeposits(db, wallet, limit),
    issueApiKey: (wallet) => accounts.issueApiKey(db, wallet),
    revokeApiKeys: (wallet) => accounts.revokeApiKeys(db, wallet),
    setCreditLowThreshold: (wallet, threshold, available) => accounts.setCreditLowThreshold(db, wallet, threshold, available),
  };
}

function webhookPage(http: HttpContext): WebhookPageOptions {
  const { db } = http.webhooks;
  return {
    webhooks: webhooksPort(http.webhooks),
    get: async (wallet, id) => {
      const webhook = await getWebhook(db, wallet, id);
      return webhook && webhookToApi(webhook);
    },
    deliveries: async (id, query) => {
      const { deliveries, hasMore } = await listDeliveries(db, id, { ...query, status: query.status as DeliveryStatus | undefined });
      return { data: deliveries.map((d) => deliveryToApi(id, d)), nextCursor: hasMore ? deliveries[deliveries.length - 1]!.eventId : null };
    },
    replay: async (id) => {
      const replayed = await replayFailed(db, id);
      wakeDelivery();
      return replayed;
    },
    deliveryStatuses: DELIVERY_STATUSES,
  };
}

/** `checkRequest`: the HTTP edge's own checks (path parameters), run after the session guard. */
export async function registerWebApp(app: FastifyInstance, http: HttpContext, options: WebOptions, checkRequest?: (request: FastifyRequest) => void): Promise<void> {
  const web: WebContext = { appUrl: () => http.appUrl, sessions: sessionStore(http.db), options };
  registerAppPage(app);
  await app.register(
    async (api) => {
      api.decorateRequest("appWallet", "");
      guardAppRequests(api, web);
      if (checkRequest) api.addHook("preHandler", async (request) => checkRequest(request));
      await api.register(sessionRoutes, web);
      await api.register(accountPageRoutes, accountPage(http.db));
      await api.register(jobRoutes, { ...jobsPort(http), walletOf: (request) => request.appWallet });
      await api.register(webhookPageRoutes, webhookPage(http));
    },
    { prefix: "/app/api" },
  );
}

export { appBundle } from "./bundle.ts";
export { WEB_MIGRATIONS } from "./schema.ts";
export { SESSION_COOKIE } from "./session-routes.ts";
export { formatSignInMessage, parseSignInMessage, SIGN_IN_STATEMENT, type SignInFields } from "./siws-message.ts";
export type { WebOptions } from "./context.ts";
