/**
 * The workers connected to this gateway and the routing rule among those hosting a model:
 * least outstanding work first, then the worker that was given a job longest ago, so requests
 * arriving one at a time rotate over idle workers (each worker's latency gets measured and no
 * worker idles while another takes everything); a staked worker wins a tie between workers never
 * used yet.
 *
 * The gateway owns its queue: a worker is never given more jobs than the concurrency it declared.
 * When every worker hosting the model is busy, a request waits here, first come first served,
 * for a slot (`lease`), within a bound of time and of queue length; so a worker's time to its
 * first token is measured only on the jobs it actually started, never on a queue the gateway
 * built for it.
 *
 * Each worker's record of outcomes (worker-health.ts) ranks it: a demoted worker gets jobs only
 * when no good worker hosting the model is free, and one that keeps failing is removed.
 */
import { performance } from "node:perf_hooks";
import { RecentSamples, median } from "../core/index.ts";
import { ModelOutages } from "./model-outages.ts";
import { SlotQueue } from "./slot-queue.ts";
import type { WorkerHandle } from "./worker-handle.ts";
import { WorkerHealth, type JobOutcome, type Standing, type WorkerStats } from "./worker-health.ts";

const LATENCY_WINDOW = 50;
/** A retry_after for a busy model is at least this, and at most MAX_BUSY_RETRY_S. */
const MIN_BUSY_RETRY_S = 1;
const MAX_BUSY_RETRY_S = 60;
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

/** Which workers may take a job, besides hosting its model. */
export interface LeaseWanted {
  /** Workers the job already failed on. */
  exclude?: ReadonlySet<string>;
  /** Only workers whose context window holds this many tokens. */
  minContextWindow?: number;
  /** Only the worker at this address. */
  address?: string;
}

function hasSlot(w: WorkerState): boolean {
  return w.outstanding < (w.handle.concurrency ?? Number.POSITIVE_INFINITY);
}

export class WorkerPool {
  private readonly workers = new Map<string, WorkerState>();
  private readonly suspended = new Set<string>();
  private assignments = 0;
  private readonly unfitListeners: UnfitListener[] = [];
  private readonly queue = new SlotQueue({
    acquire: (model, wanted) => this.acquire(model, wanted),
    slots: (model, wanted) => this.slots(model, wanted),
    typicalHoldMs: (model) => this.leaseMs.get(model)?.median() ?? null,
  });
  /** How long recent leases of each model were held: what a waiting request can expect. */
  private readonly leaseMs = new Map<string, RecentSamples>();

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
    this.queue.serve();
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
    this.queue.serve();
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
   * A worker with a free slot for a job of `model`, counted as outstanding until the lease is
   * released; undefined when none is free now. A good worker comes first; a demoted one only
   * when no good worker is free.
   */
  acquire(model: string, wanted: LeaseWanted = {}): WorkerLease | undefined {
    const hosts = this.candidates(model, wanted);
    const chosen = this.pick(hosts.filter((w) => w.health.standing === "good")) ?? this.pick(hosts);
    return chosen && this.grant(chosen, model);
  }

  /**
   * A lease as `acquire` gives one or, while every worker that fits is busy, the first slot one
   * of them frees, behind the requests that came before (slot-queue.ts): undefined at once when
   * no worker fits or no slot can be expected within `waitMs`, else after `waitMs` or once
   * `signal` aborts.
   */
  lease(model: string, wanted: LeaseWanted, until: { waitMs: number; signal?: AbortSignal }): Promise<WorkerLease | undefined> {
    const now = this.acquire(model, wanted);
    return now ? Promise.resolve(now) : this.queue.wait(model, wanted, until);
  }

  /** Requests waiting for a slot for `model`. */
  waiting(model: string): number {
    return this.queue.waiting(model);
  }

  /**
   * For a 503 when every worker hosting the model stayed busy: seconds until the queue ahead of a
   * new request has likely drained, from how long this model's recent jobs held their slots.
   */
  busyRetryAfterSeconds(model: string): number {
    const slots = this.slots(model, {});
    const typicalMs = this.leaseMs.get(model)?.median() ?? 1_000;
    const seconds = slots > 0 && Number.isFinite(slots) ? ((this.waiting(model) + 1) / slots) * (typicalMs / 1000) : MIN_BUSY_RETRY_S;
    return Math.min(MAX_BUSY_RETRY_S, Math.max(MIN_BUSY_RETRY_S, Math.ceil(seconds)));
  }

  private candidates(model: string, wanted: LeaseWanted): WorkerState[] {
    const { exclude, minContextWindow = 0, address } = wanted;
    const all = address === undefined ? [...this.workers.values()] : [this.workers.get(address)].filter((w) => w !== undefined);
    return all.filter(
      (w) => w.handle.models().includes(model) && !exclude?.has(w.handle.address) && !(minContextWindow > 0 && w.handle.contextWindow(model) < minContextWindow),
    );
  }

  /** The job slots of the workers that fit, busy or not (infinite when one declared no limit). */
  private slots(model: string, wanted: LeaseWanted): number {
    return this.candidates(model, wanted).reduce((sum, w) => sum + (w.handle.concurrency ?? Number.POSITIVE_INFINITY), 0);
  }

  /** The best worker with a free slot. */
  private pick(candidates: WorkerState[]): WorkerState | undefined {
    let best: WorkerState | undefined;
    for (const w of candidates) if (hasSlot(w) && (best === undefined || this.better(w, best))) best = w;
    return best;
  }

  /** Counts a job on the chosen worker until its lease is released. */
  private grant(chosen: WorkerState, model: string): WorkerLease {
    chosen.outstanding++;
    chosen.lastAssigned = ++this.assignments;
    const leasedAtMs = performance.now();
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
        let held = this.leaseMs.get(model);
        if (held === undefined) this.leaseMs.set(model, (held = new RecentSamples(LATENCY_WINDOW)));
        held.add(performance.now() - leasedAtMs);
        this.queue.serve();
      },
    };
  }

  private better(a: WorkerState, b: WorkerState): boolean {
    if (a.outstanding !== b.outstanding) return a.outstanding < b.outstanding;
    if (a.lastAssigned !== b.lastAssigned) return a.lastAssigned < b.lastAssigned;
    return a.handle.staked && !b.handle.staked;
  }
}
