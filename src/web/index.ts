/**
 * The wallet owner's web app, server side: the page at `/` and its API under /app/api, which
 * takes a wallet session (Sign In With Solana, then a cookie) and never an API key. Its route
 * groups are given the functions they need, bound to the other parts by src/ports.ts: this part
 * holds no database handle. The jobs and webhooks groups share /v1's ports.
 */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { type HttpPorts, jobRoutes } from "../http/index.ts";
import { accountPageRoutes, type AccountPageOptions } from "./account-routes.ts";
import { registerAppPage } from "./bundle.ts";
import { creditPageRoutes, type CreditPageOptions } from "./credit-routes.ts";
import { playgroundRoutes, type PlaygroundOptions } from "./playground-routes.ts";
import { SignInNonces } from "./nonces.ts";
import { solanaPayRoutes, type SolanaPayOptions } from "./solana-pay-routes.ts";
import type { SessionStore, WebContext, WebOptions } from "./context.ts";
import { guardAppRequests, sessionRoutes } from "./session-routes.ts";
import { usagePageRoutes, type UsagePageOptions } from "./usage-routes.ts";
import { webhookPageRoutes, type WebhookPageOptions } from "./webhook-routes.ts";

/** What the web app is given by the service that mounts it. */
export interface WebAppParts {
  /** Sign-in nonces and sessions, kept in this part's tables. */
  sessions: SessionStore;
  /** The account page's reads and writes. */
  account: AccountPageOptions;
  /** The webhooks page: /v1's webhook ports and the deliveries. */
  webhooks: WebhookPageOptions;
  /** The /v1 routes' ports, which the app's jobs page shares. */
  ports: HttpPorts;
  /** Read when an error is answered: the origin is only known once the server listens. */
  appUrl: () => string;
  options: WebOptions;
  /** Adding and withdrawing credits, bound to the wallets part's payments and the chain. */
  credits: CreditPageOptions;
  /** A Solana Pay transaction request's deposit transaction for the paying account. */
  solanaPay: SolanaPayOptions["transactionRequest"];
  /** The playground's completions, through the job service as /v1's, and the served models. */
  playground: Omit<PlaygroundOptions, "appUrl">;
  /** The Usage page and the Overview's first steps, bound to the jobs, accounts and wallets parts. */
  usage: Omit<UsagePageOptions, "appUrl">;
  /** The HTTP edge's own checks (path parameters), run after the session guard. */
  checkRequest?: (request: FastifyRequest) => void;
}

export async function registerWebApp(app: FastifyInstance, parts: WebAppParts): Promise<void> {
  const { checkRequest } = parts;
  const web: WebContext = { appUrl: parts.appUrl, sessions: parts.sessions, nonces: new SignInNonces(parts.sessions, parts.options), options: parts.options };
  registerAppPage(app);
  await app.register(
    async (api) => {
      api.decorateRequest("appWallet", "");
      guardAppRequests(api, web);
      if (checkRequest) api.addHook("preHandler", async (request) => checkRequest(request));
      await api.register(sessionRoutes, web);
      await api.register(accountPageRoutes, parts.account);
      await api.register(jobRoutes, { ...parts.ports.jobs, walletOf: (request) => request.appWallet });
      await api.register(webhookPageRoutes, parts.webhooks);
      await api.register(creditPageRoutes, parts.credits);
      await api.register(usagePageRoutes, { ...parts.usage, appUrl: parts.appUrl });
      await api.register(playgroundRoutes, { ...parts.playground, appUrl: parts.appUrl });
    },
    { prefix: "/app/api" },
  );
  await app.register(solanaPayRoutes, { prefix: "/pay", transactionRequest: parts.solanaPay, appUrl: parts.appUrl });
}

export { appBundle } from "./bundle.ts";
export { WEB_MIGRATIONS } from "./schema.ts";
export { SESSION_COOKIE } from "./session-routes.ts";
export { formatSignInMessage, parseSignInMessage, SIGN_IN_STATEMENT, type SignInFields } from "./siws-message.ts";
export type { SessionStore, WebOptions } from "./context.ts";
export type { CreditPageOptions } from "./credit-routes.ts";
export type { AccountPageOptions } from "./account-routes.ts";
export type { WebhookPageOptions } from "./webhook-routes.ts";
export type { UsagePageOptions } from "./usage-routes.ts";
export type { PlaygroundOptions } from "./playground-routes.ts";
export * as sessionQueries from "./sessions.ts";
