/**
 * `svc dev`'s faucet of test USDC, for the app's "Get test USDC": every grant is a transaction of
 * its own (the chain's grants carry a fresh nonce), and each wallet gets 3 grants at once, then
 * one a minute.
 */
import { ApiError, RateLimiter, type RateLimitOptions } from "../core/index.ts";

/** 10 USDC a grant. */
export const TEST_USDC_CREDITS = 1_000;
export const TEST_USDC_RATE_LIMIT: RateLimitOptions = { ratePerSecond: 1 / 60, burst: 3 };

export class TestUsdcFaucet {
  private readonly perWallet = new RateLimiter(TEST_USDC_RATE_LIMIT);

  /** `grant` mints test USDC to the wallet and resolves with the transaction's signature. */
  constructor(private readonly grant: (wallet: string, credits: number) => Promise<string>) {}

  /** The signature of the transaction that minted TEST_USDC_CREDITS' worth to the wallet. */
  async give(wallet: string): Promise<string> {
    const wait = this.perWallet.take(wallet);
    if (wait > 0) {
      const { burst } = TEST_USDC_RATE_LIMIT;
      throw new ApiError("rate_limited", `The test USDC faucet gives a wallet ${burst} grants at once, then one a minute; ask again in ${wait} s.`, null, { retry_after: wait });
    }
    return this.grant(wallet, TEST_USDC_CREDITS);
  }
}
