/** GET /account: the wallet behind the key and its balance. */
import type { FastifyInstance } from "fastify";
import { usdcValue } from "../../core/index.ts";
import { ERROR_RESPONSES, ref } from "../schemas.ts";

export interface AccountRoutesOptions {
  /** The wallet's available credits and its last top-up. */
  balanceOf(wallet: string): Promise<{ credits: number; lastTopupAt: Date | null }>;
}

export async function accountRoutes(app: FastifyInstance, options: AccountRoutesOptions): Promise<void> {
  app.get("/account", { schema: { response: { 200: ref("Account"), ...ERROR_RESPONSES } } }, async (request) => {
    const { wallet, keyCreatedAt } = request.owner;
    const { credits, lastTopupAt } = await options.balanceOf(wallet);
    return {
      wallet,
      credits_remaining: credits,
      usdc_value: usdcValue(credits),
      last_topup_at: lastTopupAt ? lastTopupAt.toISOString() : null,
      api_key_created_at: keyCreatedAt.toISOString(),
    };
  });
}
