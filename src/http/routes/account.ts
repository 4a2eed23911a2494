/** GET /account: the wallet behind the key and its balance. */
import type { FastifyInstance } from "fastify";
import { getWallet } from "../../accounts/accounts.ts";
import { usdcValue } from "../../core/units.ts";
import * as money from "../../jobs/money.ts";
import type { HttpContext } from "../context.ts";

export function registerAccount(app: FastifyInstance, ctx: HttpContext): void {
  app.get("/account", async (request) => {
    const { wallet, keyCreatedAt } = request.owner;
    const record = await getWallet(ctx.db, wallet);
    const credits = await money.availableCredits(ctx.db, wallet);
    return {
      wallet,
      credits_remaining: credits,
      usdc_value: usdcValue(credits),
      last_topup_at: record?.lastTopupAt ? record.lastTopupAt.toISOString() : null,
      api_key_created_at: keyCreatedAt.toISOString(),
    };
  });
}
