/**
 * The workers connected to this gateway and the routing rule among those hosting a model:
 * least outstanding work first, then the worker that was given a job longest ago, so requests
 * arriving one at a time rotate over idle workers (each worker's latency gets measured and no
 * worker idles while another takes everything); a staked worker wins a tie between workers never
 * used yet. A worker running as many jobs as the concurrency it declared is skipped. When every
 * worker hosting the model is full, the job still goes to the least loaded one (outstanding jobs
 * relative to its concurrency): it waits in that worker's queue, which serves the caller sooner
 * than a 503 would while a single slot is about to free up.
 *
 * Each worker's record of outcomes (worker-health.ts) ranks it: a demoted worker gets jobs only
 * when no good worker hosting the model is free, and one that keeps failing is removed.
 */
import { RecentSamples, median } from "../core/index.ts";
import { ModelOutages } from "./model-outages.ts";
import type { WorkerHandle } from "./worker-handle.ts";
import { WorkerHealth, type JobOutcome, type Standing, type WorkerStats } from "./worker-health.ts";

const LATENCY_WINDOW = 50;
/** How many of a worker's latest first tokens say how quick it is now (recentFirstTokenMs). */
const RECENT_FIRST_TOKENS = 8;

interface WorkerState {
  handle: WorkerHandle;
  outstanding: number;
  /** Recent times to first token. */
  firstTokenMs: RecentSamples;
  /** When it was last given a job, as a count of jobs routed by this pool (0: never). */
  lastAssigned: number;
  health: WorkerHealth;
}

export interface WorkerLease {
  worker: WorkerHandle;
  /** Record the time to first token of the job this lease routed. */
  firstToken(ms: number): void;
  /** Record how the job went on this worker; a worker that turns unfit leaves the pool. */
  outcome(outcome: JobOutcome): void;
  release(): void;
}

/** Told when a worker is removed for failing jobs, so its connection can be closed too. */
export type UnfitListener = (worker: WorkerHandle, reason: string) => void;

/** Outstanding jobs per slot the worker declared. */
function load(w: WorkerState): number {
  return w.outstanding / (w.handle.concurrency ?? Number.POSITIVE_INFINITY);
}

export class WorkerPool {
  private readonly workers = new Map<string, WorkerState>();
  private readonly suspended = new Set<string>();
  private assignments = 0;
  private readonly unfitListeners: UnfitListener[] = [];

  constructor(private readonly outages = new ModelOutages()) {}

  onUnfit(listener: UnfitListener): void {
    this.unfitListeners.push(listener);
  }

  /**
   * A worker found cheating takes no more jobs from this gateway: it leaves the pool, and adding
   * it again (a reconnect) is ignored. Kept in memory; a slashed stake says it on-chain for good.
   */
  suspend(address: string): void {
    this.suspended.add(address);
    this.remove(address);
  }

  isSuspended(address: string): boolean {
    return this.suspended.has(address);
  }

  /** Adds a worker; one already here under the same address is replaced (a reconnection). */
  add(handle: WorkerHandle): void {
    if (this.suspended.has(handle.address)) return;
    this.workers.set(handle.address, { handle, outstanding: 0, firstTokenMs: new RecentSamples(LATENCY_WINDOW), lastAssigned: 0, health: new WorkerHealth() });
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

  /** Workers connected now. */
  get size(): number {
    return this.workers.size;
  }

  /** Jobs routed to the worker and not finished yet (0 for a worker not in the pool). */
  outstanding(address: string): number {
    return this.workers.get(address)?.outstanding ?? 0;
  }

  /** Every worker in the pool. */
  all(): WorkerHandle[] {
    return [...this.workers.values()].map((w) => w.handle);
  }

  hosting(model: string): WorkerHandle[] {
    return [...this.workers.values()].filter((w) => w.handle.models().includes(model)).map((w) => w.handle);
  }

  /** Workers in good standing hosting the model: the capacity `active_workers` reports. */
  activeWorkers(model: string): number {
    let count = 0;
    for (const w of this.workers.values()) if (w.health.standing === "good" && w.handle.models().includes(model)) count++;
    return count;
  }

  /** A worker's standing and job record (undefined for one not in the pool). */
  health(address: string): { standing: Standing; stats: WorkerStats } | undefined {
    const w = this.workers.get(address);
    return w && { standing: w.health.standing, stats: { ...w.health.stats } };
  }

  /** Every model some connected worker hosts. */
  hostedModels(): Set<string> {
    const models = new Set<string>();
    for (const w of this.workers.values()) for (const m of w.handle.models()) models.add(m);
    return models;
  }

  /**
   * The largest context window among the workers hosting the model (0 when none does): the most
   * a request can get now, since routing sends a request that needs more than its first pick holds
   * to a worker with room.
   */
  contextWindow(model: string): number {
    let largest = 0;
    for (const w of this.workers.values()) if (w.handle.models().includes(model)) largest = Math.max(largest, w.handle.contextWindow(model));
    return largest;
  }

  /** p50 time to first token over recent jobs of the workers hosting the model. */
  medianLatencyMs(model: string): number | null {
    const samples: number[] = [];
    for (const w of this.workers.values()) if (w.handle.models().includes(model)) samples.push(...w.firstTokenMs.all());
    const typicalMs = median(samples);
    return typicalMs === null ? null : Math.round(typicalMs);
  }

  /**
   * The median of the worker's latest few times to first token (null before its first job):
   * recent enough to follow a worker whose upstream slows down or speeds up.
   */
  recentFirstTokenMs(address: string): number | null {
    return this.workers.get(address)?.firstTokenMs.median(RECENT_FIRST_TOKENS) ?? null;
  }

  /**
   * Pick a worker for a job and count it as outstanding until the lease is released. `exclude`
   * names workers the job already failed on; workers whose context window is below
   * `minContextWindow` are passed over.
   */
  acquire(model: string, exclude?: ReadonlySet<string>, minContextWindow = 0): WorkerLease | undefined {
    const hosts = [...this.workers.values()].filter(
      (w) => w.handle.models().includes(model) && !exclude?.has(w.handle.address) && !(minContextWindow > 0 && w.handle.contextWindow(model) < minContextWindow),
    );
    const good = hosts.filter((w) => w.health.standing === "good");
    const demoted = hosts.filter((w) => w.health.standing !== "good");
    // A demoted worker is a last resort: before queueing on a full good worker, but only when free.
    const chosen = this.pick(good, true) ?? this.pick(demoted, true) ?? this.pick(good, false) ?? this.pick(demoted, false);
    if (chosen === undefined) return undefined;
    return this.lease(chosen);
  }

  /** A lease on the worker at `address` for a job of `model`, when it is in the pool and hosts the model. */
  leaseOn(address: string, model: string): WorkerLease | undefined {
    const w = this.workers.get(address);
    return w && w.handle.models().includes(model) ? this.lease(w) : undefined;
  }

  /** The best worker with a free slot (`free`), or else the least loaded full one. */
  private pick(candidates: WorkerState[], free: boolean): WorkerState | undefined {
    let best: WorkerState | undefined;
    for (const w of candidates) {
      const hasSlot = w.outstanding < (w.handle.concurrency ?? Number.POSITIVE_INFINITY);
      if (hasSlot !== free) continue;
      if (best === undefined) best = w;
      else if (free ? this.better(w, best) : load(w) < load(best) || (load(w) === load(best) && this.better(w, best))) best = w;
    }
    return best;
  }

  private lease(chosen: WorkerState): WorkerLease {
    chosen.outstanding++;
    chosen.lastAssigned = ++this.assignments;
    let released = false;
    return {
      worker: chosen.handle,
      firstToken: (ms) => chosen.firstTokenMs.add(ms),
      outcome: (outcome) => {
        if (chosen.health.record(outcome) !== "unfit" || this.workers.get(chosen.handle.address) !== chosen) return;
        this.remove(chosen.handle.address, chosen.handle);
        for (const listener of this.unfitListeners) listener(chosen.handle, chosen.health.describe());
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
    if (a.lastAssigned !== b.lastAssigned) return a.lastAssigned < b.lastAssigned;
    return a.handle.staked && !b.handle.staked;
  }
}
