/**
 * Reconnection delays: exponential, capped, and jittered so that clients cut off by the same
 * restart (workers of a gateway, gateways of a database) do not all dial back in the same instant.
 */
export interface BackoffOptions {
  /** First delay, before jitter (default 500 ms). */
  initialMs?: number;
  /** Largest delay, before jitter (default 30 s). */
  maxMs?: number;
}

export class Backoff {
  private attempt = 0;
  private readonly initialMs: number;
  private readonly maxMs: number;

  constructor(options: BackoffOptions = {}, private readonly random: () => number = Math.random) {
    this.initialMs = options.initialMs ?? 500;
    this.maxMs = options.maxMs ?? 30_000;
  }

  /** The delay before the next attempt: between half and all of the capped exponential step. */
  next(): number {
    const step = Math.min(this.maxMs, this.initialMs * 2 ** Math.min(this.attempt, 30));
    this.attempt++;
    return Math.round(step / 2 + (this.random() * step) / 2);
  }

  /** After a successful connection the next failure starts from the first step again. */
  reset(): void {
    this.attempt = 0;
  }
}
