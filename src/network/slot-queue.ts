/**
 * Requests waiting at the gateway for a worker's job slot, first come first served. The pool
 * never gives a worker more jobs than the concurrency it declared; when every worker that fits a
 * request is busy, the request waits here instead of in a worker's own queue, for as long as its
 * caller allows. A request the queue ahead of it would keep waiting longer than that, by how long
 * this model's jobs have held their slots lately, is refused at once rather than at the end of
 * its wait; and the queue never holds more than MAX_WAITING_PER_SLOT per slot that could serve it.
 */
import type { LeaseWanted, WorkerLease } from "./lease.ts";

/** Requests that may wait for a model, per job slot of the workers hosting it, whatever the estimate. */
export const MAX_WAITING_PER_SLOT = 64;

interface Waiter {
  model: string;
  wanted: LeaseWanted;
  grant(lease: WorkerLease | undefined): void;
}

export interface SlotSource {
  /** A lease on a free slot that fits, now, or undefined. */
  acquire(model: string, wanted: LeaseWanted): WorkerLease | undefined;
  /** The job slots of the workers that fit, busy or not (infinite when one declared no limit). */
  slots(model: string, wanted: LeaseWanted): number;
  /** How long this model's jobs hold a slot, lately; null before any did. */
  typicalHoldMs(model: string): number | null;
}

export class SlotQueue {
  private readonly waiters: Waiter[] = [];

  constructor(private readonly source: SlotSource) {}

  /**
   * A lease from the first slot that frees, after the requests that came before, or undefined:
   * at once when no worker fits or the model's queue is full, else after `waitMs` or when
   * `signal` aborts.
   */
  wait(model: string, wanted: LeaseWanted, until: { waitMs: number; signal?: AbortSignal }): Promise<WorkerLease | undefined> {
    if (!this.mayWait(model, wanted, until.waitMs) || until.signal?.aborted) return Promise.resolve(undefined);
    return new Promise((resolve) => {
      const timer = setTimeout(() => grant(undefined), until.waitMs);
      const onAbort = () => grant(undefined);
      const waiter: Waiter = { model, wanted, grant: (lease) => grant(lease) };
      const grant = (lease: WorkerLease | undefined) => {
        clearTimeout(timer);
        until.signal?.removeEventListener("abort", onAbort);
        const index = this.waiters.indexOf(waiter);
        if (index >= 0) this.waiters.splice(index, 1);
        resolve(lease);
      };
      until.signal?.addEventListener("abort", onAbort, { once: true });
      this.waiters.push(waiter);
    });
  }

  /** Whether a slot that fits can be expected within `waitMs`, and the queue has room. */
  private mayWait(model: string, wanted: LeaseWanted, waitMs: number): boolean {
    const slots = this.source.slots(model, wanted);
    if (slots === 0 || this.waiting(model) >= MAX_WAITING_PER_SLOT * slots) return false;
    const expectedMs = this.expectedWaitMs(model, wanted);
    return expectedMs === null || expectedMs <= waitMs;
  }

  /**
   * How long a request arriving now can expect to wait for a slot that fits: the requests ahead
   * of it, spread over the slots, each holding its slot as long as this model's jobs have lately
   * (`holdMs` when none has yet, else null). Zero when a worker declared no limit.
   */
  expectedWaitMs(model: string, wanted: LeaseWanted, holdMs: number | null = null): number | null {
    const slots = this.source.slots(model, wanted);
    if (!Number.isFinite(slots)) return 0;
    const typicalMs = this.source.typicalHoldMs(model) ?? holdMs;
    return typicalMs === null || slots === 0 ? null : ((this.waiting(model) + 1) / slots) * typicalMs;
  }

  /** Requests waiting for a slot for `model` now. */
  waiting(model: string): number {
    let count = 0;
    for (const w of this.waiters) if (w.model === model) count++;
    return count;
  }

  /** A slot freed or a worker joined: the waiting requests take what fits them, oldest first. */
  serve(): void {
    for (let i = 0; i < this.waiters.length; ) {
      const waiter = this.waiters[i]!;
      const lease = this.source.acquire(waiter.model, waiter.wanted);
      // With no worker left that fits it, waiting longer would only delay the refusal.
      if (lease !== undefined || this.source.slots(waiter.model, waiter.wanted) === 0) waiter.grant(lease);
      else i++;
    }
  }
}
