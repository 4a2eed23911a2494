/**
 * The narrow functions each HTTP route group is given, bound here, outside the http part, to the
 * parts that own the data and to the database handle: no route, and nothing the http part holds,
 * sees the handle. One place to read what the HTTP layer asks of the rest of the service.
 */
import { type ApiKeyCache, authenticate, confirmKeys, getWallet } from "./accounts/index.ts";
import { ApiError, isId, newId } from "./core/index.ts";
import { deleteWebhook, insertWebhook, listWebhooks, parseTargetUrl, resolveTarget, TargetRefusedError, webhookToApi, type Webhooks } from "./events/index.ts";
import type { AccountRoutesOptions, HttpPorts, JobRoutesOptions, WebhookInput, WebhookRoutesOptions } from "./http/index.ts";
import type { Catalog } from "./catalog/index.ts";
import { listJobs, money, type Disputes, type JobService } from "./jobs/index.ts";
import type { Db } from "./store/index.ts";

/** Every port of the /v1 routes, bound to the service's parts. */
export function httpPorts(parts: { db: Db; apiKeys: ApiKeyCache; jobs: JobService; disputes: Disputes; catalog: Catalog; webhooks: Webhooks }): HttpPorts {
  const { db } = parts;
  return {
    async authenticate(authorization, confirmedAtAdmission) {
      const owner = await authenticate(db, authorization, parts.apiKeys);
      if (owner.keyToConfirm === undefined || confirmedAtAdmission) return owner;
      await confirmKeys(db, [owner.keyToConfirm]);
      return { wallet: owner.wallet, keyCreatedAt: owner.keyCreatedAt };
    },
    account: accountPort(db),
    jobs: jobsPort(parts),
    disputes: { openDispute: (wallet, jobId, hash) => parts.disputes.open(wallet, jobId, hash) },
    webhooks: webhooksPort(parts.webhooks),
  };
}

function accountPort(db: Db): AccountRoutesOptions {
  return {
    async balanceOf(wallet) {
      const [record, credits] = await Promise.all([getWallet(db, wallet), money.availableCredits(db, wallet)]);
      return { credits, lastTopupAt: record?.lastTopupAt ?? null };
    },
  };
}

function jobsPort(parts: { db: Db; jobs: JobService; catalog: Catalog }): JobRoutesOptions {
  return {
    listJobs: (wallet, query) => listJobs(parts.db, wallet, query),
    getJob: (wallet, id) => parts.jobs.getJob(wallet, id),
    isModel: (id) => parts.catalog.get(id) !== undefined,
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
