/**
 * The narrow functions each route group is given, bound here to the service's parts (the database
 * handle stays on this side: no route sees it). One place to read what the HTTP layer asks of the
 * rest of the service.
 */
import { getWallet } from "../accounts/index.ts";
import { ApiError, isId, newId } from "../core/index.ts";
import { deleteWebhook, insertWebhook, listWebhooks, parseTargetUrl, resolveTarget, TargetRefusedError, webhookToApi, type Webhooks } from "../events/index.ts";
import { listJobs, money } from "../jobs/index.ts";
import type { Db } from "../store/index.ts";
import type { HttpContext } from "./context.ts";
import type { AccountRoutesOptions } from "./routes/account.ts";
import type { JobRoutesOptions } from "./routes/jobs.ts";
import type { WebhookInput, WebhookRoutesOptions } from "./routes/webhooks.ts";

export function accountPort(db: Db): AccountRoutesOptions {
  return {
    async balanceOf(wallet) {
      const [record, credits] = await Promise.all([getWallet(db, wallet), money.availableCredits(db, wallet)]);
      return { credits, lastTopupAt: record?.lastTopupAt ?? null };
    },
  };
}

export function jobsPort(ctx: Pick<HttpContext, "db" | "jobs" | "catalog">): JobRoutesOptions {
  return {
    listJobs: (wallet, query) => listJobs(ctx.db, wallet, query),
    getJob: (wallet, id) => ctx.jobs.getJob(wallet, id),
    isModel: (id) => ctx.catalog.get(id) !== undefined,
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

export function webhooksPort(webhooks: Webhooks): WebhookRoutesOptions {
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
