/**
 * The workers connected to this gateway and the routing rule among those hosting a model:
 * least outstanding work first, then the lowest measured time to first token; a staked worker
 * wins a tie. A worker running as many jobs as the concurrency it declared is skipped. When every
 * worker hosting the model is full, the job still goes to the least loaded one (outstanding jobs
 * relative to its concurrency): it waits in that worker's queue, which serves the caller sooner
 * than a 503 would while a single slot is about to free up.
 */
import { ModelOutages } from "./model-outages.ts";
import type { WorkerHandle } from "./worker-handle.ts";

const LATENCY_WINDOW = 50;

interface WorkerState {
  handle: WorkerHandle;
  outstanding: number;
  /** Recent times to first token, newest last. */
  ttftMs: number[];
}

export interface WorkerLease {
  worker: WorkerHandle;
  /** Record the time to first token of the job this lease routed. */
  firstToken(ms: number): void;
  release(): void;
}

function median(values: number[]): number | null {
  if (values.length === 0) return null;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : Math.round((sorted[mid - 1]! + sorted[mid]!) / 2);
}

/** Outstanding jobs per slot the worker declared. */
function load(w: WorkerState): number {
  return w.outstanding / (w.handle.concurrency ?? Number.POSITIVE_INFINITY);
}

export class WorkerPool {
  private readonly workers = new Map<string, WorkerState>();

  constructor(private readonly outages = new ModelOutages()) {}

  /** Adds a worker; one already here under the same address is replaced (a reconnection). */
  add(handle: WorkerHandle): void {
    this.workers.set(handle.address, { handle, outstanding: 0, ttftMs: [] });
    for (const model of handle.models()) this.outages.hosted(model);
  }

  /**
   * Removes the worker at `address`; with `handle`, only if it is still that one, so a stale
   * connection going away never removes the reconnection that replaced it.
   */
  remove(address: string, handle?: WorkerHandle): void {
    const leaving = this.workers.get(address);
    if (leaving === undefined || (handle !== undefined && leaving.handle !== handle)) return;
    this.workers.delete(address);
    const stillHosted = this.hostedModels();
    for (const model of leaving.handle.models()) if (!stillHosted.has(model)) this.outages.unhosted(model);
  }

  /** For a 503 when no worker hosts the model: seconds until one likely will, from measured outages. */
  retryAfterSeconds(model: string): number {
    return this.outages.retryAfterSeconds(model);
  }

  /** Jobs routed to the worker and not finished yet (0 for a worker not in the pool). */
  outstanding(address: string): number {
    return this.workers.get(address)?.outstanding ?? 0;
  }

  hosting(model: string): WorkerHandle[] {
    return [...this.workers.values()].filter((w) => w.handle.models().includes(model)).map((w) => w.handle);
  }

  /** Every model some connected worker hosts. */
  hostedModels(): Set<string> {
    const models = new Set<string>();
    for (const w of this.workers.values()) for (const m of w.handle.models()) models.add(m);
    return models;
  }

  /** p50 time to first token over recent jobs of the workers hosting the model. */
  medianLatencyMs(model: string): number | null {
    const samples: number[] = [];
    for (const w of this.workers.values()) if (w.handle.models().includes(model)) samples.push(...w.ttftMs);
    return median(samples);
  }

  /**
   * Pick a worker for a job and count it as outstanding until the lease is released. `exclude`
   * names workers the job already failed on.
   */
  acquire(model: string, exclude?: ReadonlySet<string>): WorkerLease | undefined {
    let best: WorkerState | undefined;
    let leastLoaded: WorkerState | undefined;
    for (const w of this.workers.values()) {
      if (!w.handle.models().includes(model) || exclude?.has(w.handle.address)) continue;
      if (w.outstanding < (w.handle.concurrency ?? Number.POSITIVE_INFINITY)) {
        if (best === undefined || this.better(w, best)) best = w;
      } else if (leastLoaded === undefined || load(w) < load(leastLoaded) || (load(w) === load(leastLoaded) && this.better(w, leastLoaded))) {
        leastLoaded = w;
      }
    }
    best ??= leastLoaded;
    if (best === undefined) return undefined;
    const chosen = best;
    chosen.outstanding++;
    let released = false;
    return {
      worker: chosen.handle,
      firstToken: (ms) => {
        chosen.ttftMs.push(ms);
        if (chosen.ttftMs.length > LATENCY_WINDOW) chosen.ttftMs.shift();
      },
      release: () => {
        if (released) return;
        released = true;
        chosen.outstanding--;
      },
    };
  }

  private better(a: WorkerState, b: WorkerState): boolean {
    if (a.outstanding !== b.outstanding) return a.outstanding < b.outstanding;
    const la = median(a.ttftMs) ?? Number.POSITIVE_INFINITY;
    const lb = median(b.ttftMs) ?? Number.POSITIVE_INFINITY;
    if (la !== lb) return la < lb;
    return a.handle.staked && !b.handle.staked;
  }
}
