/**
 * How long a model stays without workers, measured, so a 503 `no_workers_available` can tell the
 * caller a `retry_after` drawn from what this gateway has seen rather than a constant. An outage
 * runs from the moment a model's last worker leaves until a worker hosting it arrives.
 */

import { median } from "../core/index.ts";

const HISTORY = 20;
/** Never served here: nothing to expect soon. */
const NEVER_HOSTED_S = 60;
/** Workers reconnect with backoff starting near half a second; a fresh outage often ends quickly. */
const FRESH_OUTAGE_S = 5;
const MAX_S = 300;

export class ModelOutages {
  /** Model → when its last worker left, in epoch ms (only while it has none). */
  private readonly downSinceMs = new Map<string, number>();
  /** Model → lengths of its recent outages in ms, newest last. */
  private readonly lengthsMs = new Map<string, number[]>();
  private readonly everHosted = new Set<string>();

  constructor(private readonly now: () => number = Date.now) {}

  /** A worker now hosts the model. */
  hosted(model: string): void {
    this.everHosted.add(model);
    const sinceMs = this.downSinceMs.get(model);
    if (sinceMs === undefined) return;
    this.downSinceMs.delete(model);
    const history = this.lengthsMs.get(model) ?? [];
    history.push(this.now() - sinceMs);
    if (history.length > HISTORY) history.shift();
    this.lengthsMs.set(model, history);
  }

  /** The model's last worker left. */
  unhosted(model: string): void {
    if (!this.downSinceMs.has(model)) this.downSinceMs.set(model, this.now());
  }

  /**
   * Seconds to wait before retrying: what remains of this model's typical outage, or, once the
   * current one has outlasted it, as long again as it has lasted so far (backing off).
   */
  retryAfterSeconds(model: string): number {
    if (!this.everHosted.has(model)) return NEVER_HOSTED_S;
    const sinceMs = this.downSinceMs.get(model);
    const elapsedMs = sinceMs === undefined ? 0 : this.now() - sinceMs;
    const history = this.lengthsMs.get(model);
    let seconds: number;
    const typicalMs = history && median(history);
    if (typicalMs && typicalMs > elapsedMs) seconds = (typicalMs - elapsedMs) / 1000;
    else seconds = Math.max(FRESH_OUTAGE_S, elapsedMs / 1000);
    return Math.min(MAX_S, Math.max(1, Math.ceil(seconds)));
  }
}
