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
 *
 * Only workers whose output the network can stand behind are sold to callers (their `vetting`):
 * a worker the operator vouches for (its seed pool) or a stake backs, or one that passed its
 * probation. A worker on probation gets no caller's job, only checks (jobs/probation.ts), one at
 * a time, and its models are not listed for it; it counts in no capacity.
 */
import { performance } from "node:perf_hooks";
import { BoundedMap, RecentSamples, median } from "../core/index.ts";
import { ModelOutages } from "./model-outages.ts";
import { SlotQueue } from "./slot-queue.ts";
import type { LeaseWanted, WorkerLease } from "./lease.ts";
import type { WorkerHandle } from "./worker-handle.ts";
import { DEFAULT_CHECKS_TO_PROVE, WorkerHealth, type JobOutcome, type Standing, type WorkerStats } from "./worker-health.ts";
import { WorkerTrust } from "./worker-trust.ts";

const LATENCY_WINDOW = 50;
/** A retry_after for a busy model is at least this, and at most MAX_BUSY_RETRY_S. */
const MIN_BUSY_RETRY_S = 1;
const MAX_BUSY_RETRY_S = 60;
/** Workers whose record (strikes, probation) is kept after they leave, for when they come back. */
const RECORDS_KEPT = 100_000;

/**
 * How far the network stands behind a worker's output: `vouched` by the operator's seed pool or a
 * stake, `proven` by the probation checks it passed, or still on `probation`.
 */
export type Vetting = "vouched" | "proven" | "probation";

interface WorkerState {
  handle: WorkerHandle;
  outstanding: number;
  /** Recent times to first token. */
  firstTokenMs: RecentSamples;
  /** When it was last given a job, as a count of jobs routed by this pool (0: never). */
  lastAssigned: number;
  health: WorkerHealth;
}

/** Told when a worker is removed for failing jobs, so its connection can be closed too. */
export type UnfitListener = (worker: WorkerHandle, reason: string) => void;

export interface WorkerPoolOptions {
  /** Who the operator vouches for; without it, only staked workers are vouched for. */
  trust?: WorkerTrust;
  /** Probation checks a worker must pass to be proven (default DEFAULT_CHECKS_TO_PROVE). */
  checksToProve?: number;
  outages?: ModelOutages;
}

export class WorkerPool {
  private readonly workers = new Map<string, WorkerState>();
  private readonly suspended = new Set<string>();
  /** Suspended workers still connected, kept so a reinstatement serves them again without a reconnect. */
  private readonly parked = new Map<string, { handle: WorkerHandle; firstTokenMs: readonly number[] }>();
  private assignments = 0;
  private readonly unfitListeners: UnfitListener[] = [];
  private readonly queue = new SlotQueue({
    acquire: (model, wanted) => this.acquire(model, wanted),
    slots: (model, wanted) => this.slots(model, wanted),
    typicalHoldMs: (model) => this.leaseMs.get(model)?.median() ?? null,
  });
  /** How long recent leases of each model were held: what a waiting request can expect. */
  private readonly leaseMs = new Map<string, RecentSamples>();
  /** Every worker's record by address, kept while it is away. */
  private readonly records = new BoundedMap<WorkerHealth>(RECORDS_KEPT);
  private readonly trust: WorkerTrust;
  private readonly checksToProve: number;
  private readonly outages: ModelOutages;

  constructor(options: WorkerPoolOptions = {}) {
    this.trust = options.trust ?? new WorkerTrust(new Set(), async () => 0n);
    this.checksToProve = options.checksToProve ?? DEFAULT_CHECKS_TO_PROVE;
    this.outages = options.outages ?? new ModelOutages();
  }

  onUnfit(listener: UnfitListener): void {
    this.unfitListeners.push(listener);
  }

  /**
   * A worker found cheating, or suspended by the operator, takes no more jobs from this gateway:
   * it leaves the pool, and adding it again (a reconnect) only parks it. Kept in memory; a slashed
   * stake says it on-chain for good, and an operator's suspension is kept in the database
   * (worker-suspensions.ts) and applied again at every start.
   */
  suspend(address: string): void {
    this.suspended.add(address);
    const leaving = this.workers.get(address);
    this.remove(address);
    if (leaving) this.parked.set(address, { handle: leaving.handle, firstTokenMs: [...leaving.firstTokenMs.all()] });
  }

  /** Lifts a suspension, whoever made it: a worker still connected is served again at once. */
  reinstate(address: string): void {
    if (!this.suspended.delete(address)) return;
    const parked = this.parked.get(address);
    this.parked.delete(address);
    if (parked) this.add(parked.handle, parked.firstTokenMs);
  }

  isSuspended(address: string): boolean {
    return this.suspended.has(address);
  }

  /** Suspended workers that are connected still (to this node, or through the bus). */
  suspendedConnected(): string[] {
    return [...this.parked.keys()];
  }

  /**
   * Adds a worker; one already here under the same address is replaced (a reconnection).
   * `firstTokenMs`: its latency samples so far (its probes'), so a model it makes listed has a
   * median at once.
   */
  add(handle: WorkerHandle, firstTokenMs: readonly number[] = []): void {
    if (this.suspended.has(handle.address)) return void this.parked.set(handle.address, { handle, firstTokenMs: [...firstTokenMs] });
    let health = this.records.get(handle.address);
    if (health === undefined) this.records.set(handle.address, (health = new WorkerHealth()));
    const state = { handle, outstanding: 0, firstTokenMs: new RecentSamples(LATENCY_WINDOW), lastAssigned: 0, health };
    for (const ms of firstTokenMs) state.firstTokenMs.add(ms);
    this.workers.set(handle.address, state);
    if (this.sold(state)) for (const model of handle.models()) this.outages.hosted(model);
    this.queue.serve();
  }

  /** How far the network stands behind the worker at `address` (on probation when unknown). */
  vetting(address: string): Vetting {
    const w = this.workers.get(address);
    return w ? this.vettingOf(w) : this.trust.inSeedPool(address) ? "vouched" : this.records.get(address)?.proven ? "proven" : "probation";
  }

  /**
   * A probation check the worker passed; the one that completes its probation makes it proven,
   * and its models are sold through it from then on.
   */
  checkPassed(address: string): void {
    const w = this.workers.get(address);
    if (w === undefined || !w.health.checkPassed(this.checksToProve)) return;
    for (const model of w.handle.models()) this.outages.hosted(model);
    this.queue.serve();
  }

  /** Another node of this deployment sells the worker: it is sold here too, without checks of this node's. */
  provenElsewhere(address: string): void {
    const w = this.workers.get(address);
    if (w === undefined || w.health.proven) return;
    w.health.proven = true;
    for (const model of w.handle.models()) this.outages.hosted(model);
    this.queue.serve();
  }

  private vettingOf(w: WorkerState): Vetting {
    if (w.handle.staked || this.trust.inSeedPool(w.handle.address)) return "vouched";
    return w.health.proven ? "proven" : "probation";
  }

  /** Whether callers' jobs may go to the worker. */
  private sold(w: WorkerState): boolean {
    return this.vettingOf(w) !== "probation";
  }

  /** A worker on probation holds one check at a time, whatever it declared. */
  private slotsOf(w: WorkerState): number {
    return this.sold(w) ? (w.handle.concurrency ?? Number.POSITIVE_INFINITY) : 1;
  }

  private hasSlot(w: WorkerState): boolean {
    return w.outstanding < this.slotsOf(w);
  }

  /**
   * Removes the worker at `address`; with `handle`, only if it is still that one, so a stale
   * connection going away never removes the reconnection that replaced it.
   */
  remove(address: string, handle?: WorkerHandle): void {
    if (handle !== undefined && this.parked.get(address)?.handle === handle) this.parked.delete(address);
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

  /** Workers connected now that callers' jobs may go to (not on probation). */
  get soldWorkers(): number {
    let count = 0;
    for (const w of this.workers.values()) if (this.sold(w)) count++;
    return count;
  }

  /** Jobs routed to the worker and not finished yet (0 for a worker not in the pool). */
  outstanding(address: string): number {
    return this.workers.get(address)?.outstanding ?? 0;
  }

  /** Every worker in the pool. */
  all(): WorkerHandle[] {
    return [...this.workers.values()].map((w) => w.handle);
  }

  /** Every worker hosting the model, on probation or not. */
  hosting(model: string): WorkerHandle[] {
    return [...this.workers.values()].filter((w) => w.handle.models().includes(model)).map((w) => w.handle);
  }

  /** The workers a caller's job for the model may go to: hosting it, and not on probation. */
  serving(model: string): WorkerHandle[] {
    return this.sellers(model).map((w) => w.handle);
  }

  private sellers(model: string): WorkerState[] {
    return [...this.workers.values()].filter((w) => w.handle.models().includes(model) && this.sold(w));
  }

  /**
   * Workers sold for the model, demoted ones included: the spec's `active_workers`, the workers
   * serving it now (a demoted worker still takes jobs when no good one is free), so a listed
   * model never reports none.
   */
  activeWorkers(model: string): number {
    return this.sellers(model).length;
  }

  /** A worker's standing and job record (undefined for one not in the pool). */
  health(address: string): { standing: Standing; stats: WorkerStats } | undefined {
    const w = this.workers.get(address);
    return w && { standing: w.health.standing, stats: { ...w.health.stats } };
  }

  /** Every model some connected worker is sold for: what GET /models lists. */
  hostedModels(): Set<string> {
    const models = new Set<string>();
    for (const w of this.workers.values()) if (this.sold(w)) for (const m of w.handle.models()) models.add(m);
    return models;
  }

  /**
   * The largest context window among the workers hosting the model (0 when none does): the most
   * a request can get now, since routing sends a request that needs more than its first pick holds
   * to a worker with room.
   */
  contextWindow(model: string): number {
    let largest = 0;
    for (const w of this.sellers(model)) largest = Math.max(largest, w.handle.contextWindow(model));
    return largest;
  }

  /** p50 time to first token over recent jobs of the workers hosting the model. */
  medianLatencyMs(model: string): number | null {
    const samples: number[] = [];
    for (const w of this.sellers(model)) samples.push(...w.firstTokenMs.all());
    const typicalMs = median(samples);
    return typicalMs === null ? null : Math.round(typicalMs);
  }

  /**
   * A worker with a free slot for a job of `model`, counted as outstanding until the lease is
   * released; undefined when none is free now. A good worker comes first; a demoted one only
   * when no good worker is free.
   */
  acquire(model: string, wanted: LeaseWanted = {}): WorkerLease | undefined {
    const hosts = this.candidates(model, wanted);
    const good = hosts.filter((w) => w.health.standing === "good");
    const vouched = wanted.vouchedFirst ? this.pick(good.filter((w) => this.vettingOf(w) === "vouched")) : undefined;
    const chosen = vouched ?? this.pick(good) ?? this.pick(hosts);
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
    const seconds = (this.queue.expectedWaitMs(model, {}, 1_000) ?? 0) / 1000;
    return Math.min(MAX_BUSY_RETRY_S, Math.max(MIN_BUSY_RETRY_S, Math.ceil(seconds)));
  }

  private candidates(model: string, wanted: LeaseWanted): WorkerState[] {
    const { exclude, minContextWindow = 0, address, onProbation = false } = wanted;
    const all = address === undefined ? [...this.workers.values()].filter((w) => this.sold(w) !== onProbation) : [this.workers.get(address)].filter((w) => w !== undefined);
    return all.filter(
      (w) => w.handle.models().includes(model) && !exclude?.has(w.handle.address) && !(minContextWindow > 0 && w.handle.contextWindow(model) < minContextWindow),
    );
  }

  /** The job slots of the workers that fit, busy or not (infinite when one declared no limit). */
  private slots(model: string, wanted: LeaseWanted): number {
    return this.candidates(model, wanted).reduce((sum, w) => sum + this.slotsOf(w), 0);
  }

  /** The best worker with a free slot. */
  private pick(candidates: WorkerState[]): WorkerState | undefined {
    let best: WorkerState | undefined;
    for (const w of candidates) if (this.hasSlot(w) && (best === undefined || this.better(w, best))) best = w;
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
        const reason = chosen.health.describe();
        chosen.health.forfeit();
        this.remove(chosen.handle.address, chosen.handle);
        for (const listener of this.unfitListeners) listener(chosen.handle, reason);
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
