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

/** `<per-second>:<burst>` (e.g. `500:1000`), or `off` (false): the per-IP limit as an operator writes it. */
export function parseRateLimit(text: string): RateLimitOptions | false {
  if (text === "off") return false;
  const match = /^(\d+(?:\.\d+)?):(\d+)$/.exec(text);
  const ratePerSecond = Number(match?.[1]);
  const burst = Number(match?.[2]);
  if (!match || !(ratePerSecond > 0) || !(burst >= 1)) {
    throw new RangeError(`a rate limit is <requests per second>:<burst> (e.g. 50:100) or off, got '${text}'`);
  }
  return { ratePerSecond, burst };
}

/** `perSecond` tokens a second, held up to `burst`; taken `amount` at a time or not at all. */
export class TokenBucket {
  private tokens: number;

  constructor(
    private readonly perSecond: number,
    private readonly burst: number,
    private updatedAtMs = performance.now(),
  ) {
    this.tokens = burst;
  }

  /** Takes `amount` when the bucket holds it and returns 0; else takes nothing and returns the seconds until it would hold it. */
  take(amount = 1, nowMs = performance.now()): number {
    this.refill(nowMs);
    if (this.tokens >= amount) {
      this.tokens -= amount;
      return 0;
    }
    return (amount - this.tokens) / this.perSecond;
  }

  isFull(nowMs = performance.now()): boolean {
    this.refill(nowMs);
    return this.tokens >= this.burst;
  }

  private refill(nowMs: number): void {
    this.tokens = Math.min(this.burst, this.tokens + ((nowMs - this.updatedAtMs) / 1000) * this.perSecond);
    this.updatedAtMs = nowMs;
  }
}

/** A token bucket per key. */
export class RateLimiter {
  private readonly buckets = new Map<string, TokenBucket>();

  constructor(private readonly options: RateLimitOptions = DEFAULT_RATE_LIMIT) {}

  /** Take `amount` tokens (one by default) for `key`; returns 0 when allowed, else the whole seconds until they are available. */
  take(key: string, now = Date.now(), amount = 1): number {
    const { ratePerSecond, burst } = this.options;
    let bucket = this.buckets.get(key);
    if (bucket === undefined) this.buckets.set(key, (bucket = new TokenBucket(ratePerSecond, burst, now)));
    const waitS = bucket.take(amount, now);
    if (waitS > 0) return Math.max(1, Math.ceil(waitS));
    if (this.buckets.size > 10_000) this.evictFull(now);
    return 0;
  }

  /** Forget buckets that have refilled: they hold no information. */
  private evictFull(now: number): void {
    for (const [key, bucket] of this.buckets) if (bucket.isFull(now)) this.buckets.delete(key);
  }
}
