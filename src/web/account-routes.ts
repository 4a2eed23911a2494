/**
 * The signed-in wallet's overview, its one API key (create, replace, revoke: the full key is in
 * the answer that makes it and nowhere else) and its settings.
 */
import type { FastifyInstance } from "fastify";
import { apiKeyCreatedAt, getWallet, issueApiKey, revokeApiKeys, setCreditLowThreshold } from "../accounts/accounts.ts";
import { ApiError } from "../core/errors.ts";
import { usdcValue } from "../core/units.ts";
import * as money from "../jobs/money.ts";
import type { Db } from "../store/db.ts";

const MAX_THRESHOLD_CREDITS = 1_000_000_000;
/** The overview lists this many of the latest deposits. */
const RECENT_DEPOSITS = 20;

export function registerAccountRoutes(app: FastifyInstance, db: Db): void {
  app.get("/overview", async (request) => {
    const wallet = request.appWallet;
    const [record, credits, keyCreatedAt] = await Promise.all([getWallet(db, wallet), money.availableCredits(db, wallet), apiKeyCreatedAt(db, wallet)]);
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

  app.get("/deposits", async (request) => ({
    object: "list",
    data: (await money.recentDeposits(db, request.appWallet, RECENT_DEPOSITS)).map((d) => ({
      credits_added: d.credits,
      usdc_value: usdcValue(d.credits),
      deposit_tx: d.depositTx,
      created_at: d.at.toISOString(),
    })),
  }));

  // One key per wallet: making one replaces the one before, which stops working at once.
  app.post("/api-key", async (request) => {
    const key = await issueApiKey(db, request.appWallet);
    return { object: "api_key", key, created_at: (await apiKeyCreatedAt(db, request.appWallet))!.toISOString() };
  });

  app.delete("/api-key", async (request) => {
    await revokeApiKeys(db, request.appWallet);
    return { object: "api_key", deleted: true };
  });

  app.put("/settings", async (request) => {
    const threshold = ((request.body ?? {}) as Record<string, unknown>).credit_low_threshold;
    if (typeof threshold !== "number" || !Number.isInteger(threshold) || threshold < 0 || threshold > MAX_THRESHOLD_CREDITS) {
      throw new ApiError("invalid_request", `credit_low_threshold must be a whole number of credits from 0 to ${MAX_THRESHOLD_CREDITS}.`, "credit_low_threshold");
    }
    await setCreditLowThreshold(db, request.appWallet, threshold, await money.availableCredits(db, request.appWallet));
    return { object: "settings", credit_low_threshold: threshold };
  });
}
