/**
 * The signed-in wallet's overview, its one API key (create, replace, revoke: the full key is in
 * the answer that makes it and nowhere else) and its settings.
 */
import type { FastifyInstance } from "fastify";
import type { Wallet } from "../accounts/index.ts";
import { usdcValue } from "../core/index.ts";
import { ERROR_RESPONSES, int, maybe, object, str, timestamp } from "../http/index.ts";

const MAX_THRESHOLD_CREDITS = 1_000_000_000;
/** The overview lists this many of the latest deposits. */
const RECENT_DEPOSITS = 20;

/** The accounts and money functions these routes use, bound to the service's database. */
export interface AccountPageOptions {
  getWallet(wallet: string): Promise<Wallet | undefined>;
  availableCredits(wallet: string): Promise<number>;
  apiKeyCreatedAt(wallet: string): Promise<Date | undefined>;
  recentDeposits(wallet: string, limit: number): Promise<{ credits: number; at: Date; depositTx: string | null }[]>;
  issueApiKey(wallet: string): Promise<string>;
  revokeApiKeys(wallet: string): Promise<void>;
  setCreditLowThreshold(wallet: string, thresholdCredits: number, availableCredits: number): Promise<void>;
}

const settingsBody = {
  type: "object",
  required: ["credit_low_threshold"],
  properties: {
    credit_low_threshold: {
      type: "integer",
      minimum: 0,
      maximum: MAX_THRESHOLD_CREDITS,
      description: `a whole number of credits from 0 to ${MAX_THRESHOLD_CREDITS}`,
    },
  },
};

const respond = (body: unknown) => ({ schema: { response: { 200: body, ...ERROR_RESPONSES } } });
const overview = object({
  object: { const: "overview" },
  wallet: str,
  credits_remaining: int,
  usdc_value: { type: "number" },
  last_topup_at: timestamp,
  api_key_created_at: timestamp,
  credit_low_threshold: int,
});
const deposit = object({ credits_added: int, usdc_value: { type: "number" }, deposit_tx: maybe("string"), created_at: str });
const deposits = object({ object: { const: "list" }, data: { type: "array", items: deposit } });
const apiKey = object({ object: { const: "api_key" }, key: { ...str, description: "The full key: shown in this answer only." }, created_at: str });
const apiKeyDeleted = object({ object: { const: "api_key" }, deleted: { const: true } });
const settings = object({ object: { const: "settings" }, credit_low_threshold: int });

export async function accountPageRoutes(app: FastifyInstance, accounts: AccountPageOptions): Promise<void> {
  app.get("/overview", respond(overview), async (request) => {
    const wallet = request.appWallet;
    const [record, credits, keyCreatedAt] = await Promise.all([accounts.getWallet(wallet), accounts.availableCredits(wallet), accounts.apiKeyCreatedAt(wallet)]);
    return {
      object: "overview",
      wallet,
      credits_remaining: credits,
      usdc_value: usdcValue(credits),
      last_topup_at: record?.lastTopupAt?.toISOString() ?? null,
      api_key_created_at: keyCreatedAt?.toISOString() ?? null,
      credit_low_threshold: record?.creditLowThreshold ?? 100,
    };
  });

  app.get("/deposits", respond(deposits), async (request) => ({
    object: "list",
    data: (await accounts.recentDeposits(request.appWallet, RECENT_DEPOSITS)).map((d) => ({
      credits_added: d.credits,
      usdc_value: usdcValue(d.credits),
      deposit_tx: d.depositTx,
      created_at: d.at.toISOString(),
    })),
  }));

  // One key per wallet: making one replaces the one before, which stops working at once.
  app.post("/api-key", respond(apiKey), async (request) => {
    const key = await accounts.issueApiKey(request.appWallet);
    return { object: "api_key", key, created_at: (await accounts.apiKeyCreatedAt(request.appWallet))!.toISOString() };
  });

  app.delete("/api-key", respond(apiKeyDeleted), async (request) => {
    await accounts.revokeApiKeys(request.appWallet);
    return { object: "api_key", deleted: true };
  });

  app.put("/settings", { schema: { body: settingsBody, response: { 200: settings, ...ERROR_RESPONSES } } }, async (request) => {
    const threshold = (request.body as { credit_low_threshold: number }).credit_low_threshold;
    await accounts.setCreditLowThreshold(request.appWallet, threshold, await accounts.availableCredits(request.appWallet));
    return { object: "settings", credit_low_threshold: threshold };
  });
}
