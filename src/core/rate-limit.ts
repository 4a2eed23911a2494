/**
 * A token bucket per key (a client's IP): the HTTP part's per-IP burst limit (DECISIONS.md: 50
 * requests/s, burst 100 by default; unrelated to network capacity, which answers 503 instead)
 * and the worker gateway's handshake limit both count with it.
 */
export interface RateLimitOptions {
  ratePerSecond: number;
  burst: number;
}

export const DEFAULT_RATE_LIMIT: RateLimitOptions = { ratePerSecond: 50, burst: 100 };

interface Bucket {
  tokens: number;
  updatedAt: number;
}

export class RateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(private readonly options: RateLimitOptions = DEFAULT_RATE_LIMIT) {}

  /** Take one token for `key`; returns 0 when allowed, else the seconds until a token is available. */
  take(key: string, now = Date.now()): number {
    const { ratePerSecond, burst } = this.options;
    const bucket = this.buckets.get(key) ?? { tokens: burst, updatedAt: now };
    bucket.tokens = Math.min(burst, bucket.tokens + ((now - bucket.updatedAt) / 1000) * ratePerSecond);
    bucket.updatedAt = now;
    this.buckets.set(key, bucket);
    if (bucket.tokens >= 1) {
      bucket.tokens -= 1;
      if (this.buckets.size > 10_000) this.evictFull(now);
      return 0;
    }
    return Math.max(1, Math.ceil((1 - bucket.tokens) / ratePerSecond));
  }

  /** Forget buckets that have refilled: they hold no information. */
  private evictFull(now: number): void {
    for (const [key, bucket] of this.buckets) {
      if (bucket.tokens + ((now - bucket.updatedAt) / 1000) * this.options.ratePerSecond >= this.options.burst) this.buckets.delete(key);
    }
  }
}
