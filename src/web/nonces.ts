/**
 * The sign-in nonces a node hands out, within two bounds. Every nonce is a database row kept
 * until it is used or expires (10 minutes), so without them anyone could fill the table and slow
 * every sign-in: one client address gets a burst of 10, then 5 a minute (a token bucket keyed by
 * its IP), and the node keeps at most 10,000 nonces outstanding (handed out, unused, unexpired).
 *
 * The outstanding count is this node's own, kept in memory, so no request counts the table: with
 * several nodes the table holds at most nodes × the cap, and a nonce one node handed out and
 * another used counts on the first until it expires (an overestimate, never an underestimate).
 * Expired rows are deleted at most once a minute, by the node's next nonce.
 */
import { ApiError, RateLimiter, type RateLimitOptions } from "../core/index.ts";
import type { SessionStore, WebOptions } from "./context.ts";

/** A person signing in asks for one nonce per attempt; ten at once and five a minute is ample. */
export const NONCE_RATE_LIMIT: RateLimitOptions = { ratePerSecond: 5 / 60, burst: 10 };
export const MAX_OUTSTANDING_NONCES = 10_000;
const SWEEP_INTERVAL_MS = 60_000;

export class SignInNonces {
  private readonly perAddress: RateLimiter | undefined;
  private readonly limit: RateLimitOptions | false;
  private readonly max: number;
  /** Nonce → expiry (ms), in the order handed out: the lifetime is fixed, so also in order of expiry. */
  private readonly outstanding = new Map<string, number>();
  /** Nonces being written: counted against the cap before they exist, so concurrent asks cannot pass it. */
  private writing = 0;
  private nextSweepMs = 0;

  constructor(
    private readonly store: SessionStore,
    options: WebOptions,
  ) {
    this.limit = options.nonceRateLimit ?? NONCE_RATE_LIMIT;
    this.perAddress = this.limit === false ? undefined : new RateLimiter(this.limit);
    this.max = options.maxOutstandingNonces ?? MAX_OUTSTANDING_NONCES;
  }

  /** A fresh nonce for `client` (its IP address); 429 rate_limited past either bound. */
  async issue(client: string, now = new Date()): Promise<{ nonce: string; expiresAt: Date }> {
    this.admit(client, now.getTime());
    this.writing++;
    try {
      if (now.getTime() >= this.nextSweepMs) {
        this.nextSweepMs = now.getTime() + SWEEP_INTERVAL_MS;
        await this.store.sweepNonces();
      }
      const issued = await this.store.issueNonce(now);
      this.outstanding.set(issued.nonce, issued.expiresAt.getTime());
      return issued;
    } finally {
      this.writing--;
    }
  }

  /** Uses the nonce up: its expiry once, undefined when it was used or is unknown. */
  use(nonce: string): Promise<Date | undefined> {
    this.outstanding.delete(nonce);
    return this.store.useNonce(nonce);
  }

  private admit(client: string, nowMs: number): void {
    const wait = this.perAddress?.take(client, nowMs) ?? 0;
    if (wait > 0 && this.limit) {
      const { burst, ratePerSecond } = this.limit;
      const message = `This address has asked for sign-in nonces too often (${burst} at once, then ${+(ratePerSecond * 60).toFixed(2)} a minute); ask again in ${wait} s.`;
      throw new ApiError("rate_limited", message, null, { retry_after: wait });
    }
    for (const [nonce, expiresAt] of this.outstanding) {
      if (expiresAt > nowMs) break;
      this.outstanding.delete(nonce);
    }
    if (this.outstanding.size + this.writing < this.max) return;
    const oldest = this.outstanding.values().next().value ?? nowMs;
    const retryAfter = Math.max(1, Math.ceil((oldest - nowMs) / 1000));
    const message = `Too many sign-ins are under way: ${this.max} nonces are handed out and not used yet, the most this server keeps. Ask again in ${retryAfter} s.`;
    throw new ApiError("rate_limited", message, null, { retry_after: retryAfter });
  }
}
