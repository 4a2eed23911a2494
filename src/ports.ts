/**
 * The narrow functions each route group is given, /v1's and the web app's alike, bound here to
 * the parts that own the data and to the database handle: no route, and nothing the http and web
 * parts hold, sees the handle. One place to read what the routes ask of the rest of the service.
 */
import { type ApiKeyCache, accounts, authenticate, confirmKeys, getWallet, refuseSuspendedWallet } from "./accounts/index.ts";
import type { Chain } from "./chain/index.ts";
import { ApiError, baseUnitsToCredits, creditsToBaseUnits, isId, newId, type Signer } from "./core/index.ts";
import {
  DELIVERY_STATUSES,
  type DeliveryStatus,
  deleteWebhook,
  deliveryToApi,
  getWebhook,
  insertWebhook,
  listDeliveries,
  listWebhooks,
  parseTargetUrl,
  replayFailed,
  resolveTarget,
  TargetRefusedError,
  wakeDelivery,
  webhookToApi,
  type Webhooks,
} from "./events/index.ts";
import type { AccountRoutesOptions, HttpContext, HttpPorts, IdempotencyPort, JobRoutesOptions, WebhookInput, WebhookRoutesOptions } from "./http/index.ts";
import { IdempotencyKeys } from "./idempotency/index.ts";
import type { Catalog } from "./catalog/index.ts";
import { jobEnding, listJobs, spendByDay, type Disputes, type JobService } from "./jobs/index.ts";
import type { WorkerPool } from "./network/index.ts";
import type { Db } from "./store/index.ts";
import { type AccountPageOptions, type CreditPageOptions, type PlaygroundOptions, type SessionStore, sessionQueries, type UsagePageOptions, type WebhookPageOptions, type WebOptions } from "./web/index.ts";
import { availableCredits, recentDeposits, type WalletPayments } from "./wallets/index.ts";

/** Every port of the /v1 routes, bound to the service's parts. */
export function httpPorts(
  parts: { db: Db; apiKeys: ApiKeyCache; jobs: JobService; disputes: Disputes; catalog: Catalog; webhooks: Webhooks },
  options: { idempotencyWaitMs?: number | undefined } = {},
): HttpPorts {
  const { db } = parts;
  const idempotency = idempotencyPort(db, parts.jobs, options.idempotencyWaitMs);
  return {
    async authenticate(authorization, confirmedAtAdmission) {
      const owner = await authenticate(db, authorization, parts.apiKeys);
      if (owner.keyToConfirm === undefined || confirmedAtAdmission) return owner;
      await confirmKeys(db, [owner.keyToConfirm]);
      return { wallet: owner.wallet, keyCreatedAt: owner.keyCreatedAt };
    },
    account: accountPort(db),
    jobs: jobsPort(parts),
    disputes: { openDispute: (wallet, jobId, hash) => parts.disputes.open(wallet, jobId, hash), idempotency },
    webhooks: { ...webhooksPort(parts.webhooks), idempotency },
    idempotency,
  };
}

/** The POST routes' stored `Idempotency-Key`s (src/idempotency). */
function idempotencyPort(db: Db, jobs: JobService, waitForFirstMs: number | undefined): IdempotencyPort {
  const keys = new IdempotencyKeys(db);
  return {
    ...(waitForFirstMs !== undefined ? { waitForFirstMs } : {}),
    jobEnded: async (wallet, jobId) => {
      const job = await jobs.getJob(wallet, jobId);
      return job && jobEnding(job);
    },
    reclaim: (wallet, key, fingerprint, jobId) => keys.reclaim(wallet, key, fingerprint, jobId),
    recordUnanswered: (wallet, key, jobId, outcome) => keys.recordUnanswered(wallet, key, jobId, outcome),
    claim: (wallet, key, fingerprint) => keys.claim(wallet, key, fingerprint),
    read: (wallet, key) => keys.read(wallet, key),
    linkJob: (wallet, key, claim, jobId) => keys.linkJob(wallet, key, claim, jobId),
    record: (wallet, key, claim, outcome) => keys.record(wallet, key, claim, outcome),
    release: (wallet, key, claim) => keys.release(wallet, key, claim),
    confirmKey: (keyHash) => confirmKeys(db, [keyHash]),
  };
}

function accountPort(db: Db): AccountRoutesOptions {
  return {
    async balanceOf(wallet) {
      const [record, credits] = await Promise.all([getWallet(db, wallet), availableCredits(db, wallet)]);
      // The spec's last_topup_at is a timestamp: a wallet never funded has its balance since its account opened.
      return { credits, lastTopupAt: record?.lastTopupAt ?? record?.createdAt ?? null };
    },
  };
}

function jobsPort(parts: { db: Db; jobs: JobService; catalog: Catalog }): JobRoutesOptions {
  return {
    listJobs: (wallet, query) => listJobs(parts.db, wallet, query),
    getJob: (wallet, id) => parts.jobs.getJob(wallet, id),
    // A retired model's jobs stay listable by it.
    isModel: (id) => parts.catalog.known(id),
  };
}

async function checkTarget(webhooks: Webhooks, target: string): Promise<void> {
  try {
    await resolveTarget(parseTargetUrl(target, webhooks.policy), webhooks.policy);
  } catch (err) {
    if (err instanceof TargetRefusedError) throw new ApiError("invalid_request", err.message, "url");
    throw err;
  }
}

function webhooksPort(webhooks: Webhooks): WebhookRoutesOptions {
  const { db } = webhooks;
  return {
    async create(wallet: string, input: WebhookInput) {
      await checkTarget(webhooks, input.url);
      const id = newId("wh");
      const sealedSecret = webhooks.secrets.seal(input.secret, id);
      return webhookToApi(await insertWebhook(db, { id, wallet, url: input.url, events: input.events, sealedSecret }));
    },
    list: async (wallet) => (await listWebhooks(db, wallet)).map(webhookToApi),
    // An id no webhook could have is never looked up.
    remove: async (wallet, id) => isId("wh", id) && deleteWebhook(db, wallet, id),
  };
}

/** The web app's own ports: sign-in sessions, the account page, the webhooks page and the playground. */
export function webAppPorts(parts: { db: Db; webhooks: Webhooks; ports: HttpPorts; jobs: JobService; catalog: Catalog; pool: WorkerPool }): {
  sessions: SessionStore;
  account: AccountPageOptions;
  webhooks: WebhookPageOptions;
  playground: Omit<PlaygroundOptions, "appUrl">;
  usage: Omit<UsagePageOptions, "appUrl">;
} {
  // The playground's jobs start as /v1's do; a session's wallet has no key for the admission to confirm.
  // A suspended wallet spends nothing through its session either.
  const startJob: PlaygroundOptions["startJob"] = async (caller, chat, signal) => {
    await refuseSuspendedWallet(parts.db, caller.wallet);
    return parts.jobs.start(caller, chat, signal);
  };
  const playground: Omit<PlaygroundOptions, "appUrl"> = { startJob, models: { catalog: parts.catalog, pool: parts.pool } };
  return { sessions: sessionStore(parts.db), account: accountPage(parts.db), webhooks: webhookPage(parts.webhooks, parts.ports), playground, usage: usagePage(parts) };
}

/** The Usage page and the Overview's first steps: the jobs part's spend, the live key, the served models. */
function usagePage(parts: { db: Db; catalog: Catalog; pool: WorkerPool }): Omit<UsagePageOptions, "appUrl"> {
  const { db } = parts;
  return {
    spendByDay: (wallet, days) => spendByDay(db, wallet, days),
    availableCredits: (wallet) => availableCredits(db, wallet),
    hasApiKey: async (wallet) => (await accounts.apiKeyCreatedAt(db, wallet)) !== undefined,
    hasJob: async (wallet) => (await listJobs(db, wallet, { limit: 1 })).jobs.length > 0,
    servedModels: () => {
      const hosted = parts.pool.hostedModels();
      return parts.catalog.all().filter((m) => hosted.has(m.id)).map((m) => m.id);
    },
  };
}

function sessionStore(db: Db): SessionStore {
  return {
    issueNonce: (now) => sessionQueries.issueNonce(db, now),
    useNonce: (nonce) => sessionQueries.useNonce(db, nonce),
    sweepNonces: () => sessionQueries.sweepNonces(db),
    openSession: (wallet, ttlMs) => sessionQueries.openSession(db, wallet, ttlMs),
    sessionWallet: (token) => sessionQueries.sessionWallet(db, token),
    closeSession: (token) => sessionQueries.closeSession(db, token),
  };
}

function accountPage(db: Db): AccountPageOptions {
  return {
    getWallet: (wallet) => getWallet(db, wallet),
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

/** The web app's credit routes, bound to the wallet payments and the chain. */
function creditPage(payments: WalletPayments, chain: Chain, devWallet: () => Signer | undefined, appUrl: () => string): CreditPageOptions {
  return {
    prepareDeposit: (wallet, credits) => payments.prepareDeposit(wallet, credits),
    prepareWithdrawal: (wallet, credits) => payments.prepareWithdrawal(wallet, credits),
    submit: (wallet, id, signed) => payments.submit(wallet, id, signed),
    signAs: (signer, id) => payments.signAs(signer, id),
    walletUsdcCredits: async (wallet) => baseUnitsToCredits(await chain.walletUsdc(wallet)),
    recentWithdrawals: (wallet, limit) => payments.recentWithdrawals(wallet, limit),
    grantTestUsdc: async (wallet, credits) => (await chain.grantUsdc({ to: wallet, amount: creditsToBaseUnits(credits) })).signature,
    devWallet,
    createPayRequest: (wallet, credits) => payments.createPayRequest(wallet, credits),
    payRequestState: (wallet, id) => payments.payRequestState(wallet, id),
    appUrl,
  };
}

/** The web app's credit pages and the Solana Pay transaction requests; the dev wallet and the origin are read when used. */
export function moneyPages(payments: WalletPayments, chain: Chain, web: WebOptions, ctx: HttpContext) {
  return {
    credits: creditPage(payments, chain, () => web.devWallet, () => ctx.appUrl),
    solanaPay: (id: string, account: string) => payments.transactionRequest(id, account),
  };
}
