/**
 * The wallet owner's web app, server side: the page at `/` and its API under /app/api, which
 * takes a wallet session (Sign In With Solana, then a cookie) and never an API key. Here the
 * app's route groups are given the functions they need, bound to the database the service hands
 * this part (the HTTP part's context carries none); the jobs and webhooks groups share /v1's ports.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { accounts } from "../accounts/index.ts";
import { DELIVERY_STATUSES, deliveryToApi, getWebhook, listDeliveries, replayFailed, wakeDelivery, webhookToApi, type DeliveryStatus, type Webhooks } from "../events/index.ts";
import { type HttpPorts, jobRoutes } from "../http/index.ts";
import { availableCredits, recentDeposits } from "../wallets/index.ts";
import type { Db } from "../store/index.ts";
import { accountPageRoutes, type AccountPageOptions } from "./account-routes.ts";
import { registerAppPage } from "./bundle.ts";
import { creditPageRoutes, type CreditPageOptions } from "./credit-routes.ts";
import { SignInNonces } from "./nonces.ts";
import { solanaPayRoutes, type SolanaPayOptions } from "./solana-pay-routes.ts";
import type { SessionStore, WebContext, WebOptions } from "./context.ts";
import { guardAppRequests, sessionRoutes } from "./session-routes.ts";
import * as sessions from "./sessions.ts";
import { webhookPageRoutes, type WebhookPageOptions } from "./webhook-routes.ts";

function sessionStore(db: Db): SessionStore {
  return {
    issueNonce: (now) => sessions.issueNonce(db, now),
    useNonce: (nonce) => sessions.useNonce(db, nonce),
    sweepNonces: () => sessions.sweepNonces(db),
    openSession: (wallet, ttlMs) => sessions.openSession(db, wallet, ttlMs),
    sessionWallet: (token) => sessions.sessionWallet(db, token),
    closeSession: (token) => sessions.closeSession(db, token),
  };
}

function accountPage(db: Db): AccountPageOptions {
  return {
    getWallet: (wallet) => accounts.getWallet(db, wallet),
    availableCredits: (wallet) => availableCredits(db, wallet),
    apiKeyCreatedAt: (wallet) => accounts.apiKeyCreatedAt(db, wallet),
    recentDeposits: (wallet, limit) => recentDeposits(db, wallet, limit),
    issueApiKey: (wallet) => accounts.issueApiKey(db, wallet),
    revokeApiKeys: (wallet) => accounts.revokeApiKeys(db, wallet),
    setCreditLowThreshold: (wallet, threshold, available) => accounts.setCreditLowThreshold(db, wallet, threshold, available),
  };
}

function webhookPage(webhooks: Webhooks, ports: HttpPorts): WebhookPageOptions {
  const { db } = webhooks;
  return {
    webhooks: ports.webhooks,
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

/** What the web app is given by the service that mounts it. */
export interface WebAppParts {
  db: Db;
  webhooks: Webhooks;
  /** The /v1 routes' ports, which the app's jobs and webhooks pages share. */
  ports: HttpPorts;
  /** Read when an error is answered: the origin is only known once the server listens. */
  appUrl: () => string;
  options: WebOptions;
  /** Adding and withdrawing credits, bound to the jobs part's wallet payments and the chain. */
  credits: CreditPageOptions;
  /** A Solana Pay transaction request's deposit transaction for the paying account. */
  solanaPay: SolanaPayOptions["transactionRequest"];
  /** The HTTP edge's own checks (path parameters), run after the session guard. */
  checkRequest?: (request: FastifyRequest) => void;
}

export async function registerWebApp(app: FastifyInstance, parts: WebAppParts): Promise<void> {
  const { db, checkRequest } = parts;
  const store = sessionStore(db);
  const web: WebContext = { appUrl: parts.appUrl, sessions: store, nonces: new SignInNonces(store, parts.options), options: parts.options };
  registerAppPage(app);
  await app.register(
    async (api) => {
      api.decorateRequest("appWallet", "");
      guardAppRequests(api, web);
      if (checkRequest) api.addHook("preHandler", async (request) => checkRequest(request));
      await api.register(sessionRoutes, web);
      await api.register(accountPageRoutes, accountPage(db));
      await api.register(jobRoutes, { ...parts.ports.jobs, walletOf: (request) => request.appWallet });
      await api.register(webhookPageRoutes, webhookPage(parts.webhooks, parts.ports));
      await api.register(creditPageRoutes, parts.credits);
    },
    { prefix: "/app/api" },
  );
  await app.register(solanaPayRoutes, { prefix: "/pay", transactionRequest: parts.solanaPay, appUrl: parts.appUrl });
}

export { appBundle } from "./bundle.ts";
export { WEB_MIGRATIONS } from "./schema.ts";
export { SESSION_COOKIE } from "./session-routes.ts";
export { formatSignInMessage, parseSignInMessage, SIGN_IN_STATEMENT, type SignInFields } from "./siws-message.ts";
export type { WebOptions } from "./context.ts";
export type { CreditPageOptions } from "./credit-routes.ts";
