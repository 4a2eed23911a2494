/** Routing respects the concurrency each worker declared; beyond it requests wait at the gateway, in order. */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { WorkerHandle } from "../../src/network/worker-handle.ts";
import { MAX_WAITING_PER_SLOT } from "../../src/network/slot-queue.ts";
import type { WorkerLease } from "../../src/network/lease.ts";
import { WorkerPool } from "../../src/network/worker-pool.ts";
import { WorkerTrust } from "../../src/network/worker-trust.ts";

/** Routing reads only a worker's address, models, concurrency and stake; staked, it is sold to callers. */
function host(address: string, concurrency?: number, staked = true): WorkerHandle {
  return {
    address,
    staked,
    ...(concurrency !== undefined ? { concurrency } : {}),
    models: () => ["m"],
    contextWindow: () => 2048,
    countPromptTokens: () => Promise.resolve(1),
    run: () => (async function* () {})(),
    signSettlement: () => Promise.reject(new Error("routing never asks for a settlement")),
  };
}

test("a worker is never given more jobs than its declared concurrency", () => {
  const pool = new WorkerPool();
  pool.add(host("small", 1));
  pool.add(host("big", 3));
  const leases: WorkerLease[] = [];
  const take = () => {
    const lease = pool.acquire("m");
    if (lease) leases.push(lease);
    return lease?.worker.address;
  };
  // Least outstanding first; "small" is full after its one job, so "big" takes the next three.
  assert.deepEqual([take(), take(), take(), take()].sort(), ["big", "big", "big", "small"]);
  assert.equal(take(), undefined, "both full: no lease now");
  assert.equal(pool.outstanding("small"), 1);
  assert.equal(pool.outstanding("big"), 3);
  for (const lease of leases) lease.release();
  assert.equal(pool.outstanding("small") + pool.outstanding("big"), 0);
});

test("while every worker is busy, requests wait at the gateway and freed slots go to the oldest first", async () => {
  const pool = new WorkerPool();
  pool.add(host("w", 1));
  const first = pool.acquire("m")!;
  const order: string[] = [];
  const a = pool.lease("m", {}, { waitMs: 5_000 }).then((lease) => (order.push("a"), lease));
  const b = pool.lease("m", {}, { waitMs: 5_000 }).then((lease) => (order.push("b"), lease));
  assert.equal(pool.waiting("m"), 2);
  first.release();
  const leaseA = (await a)!;
  assert.equal(pool.outstanding("w"), 1, "the slot passed straight to the first waiter");
  leaseA.release();
  (await b)!.release();
  assert.deepEqual(order, ["a", "b"]);
  assert.equal(pool.waiting("m"), 0);
});

test("a wait ends empty when its time runs out, its caller leaves, the queue is full, or no worker is left", async () => {
  const pool = new WorkerPool();
  const w = host("w", 1);
  pool.add(w);
  const busy = pool.acquire("m")!;
  assert.equal(await pool.lease("m", {}, { waitMs: 20 }), undefined, "timed out");
  const left = new AbortController();
  const leaving = pool.lease("m", {}, { waitMs: 5_000, signal: left.signal });
  left.abort();
  assert.equal(await leaving, undefined, "the caller left");
  const queued = Array.from({ length: MAX_WAITING_PER_SLOT }, () => pool.lease("m", {}, { waitMs: 5_000 }));
  assert.equal(await pool.lease("m", {}, { waitMs: 5_000 }), undefined, "the queue holds MAX_WAITING_PER_SLOT per slot");
  assert.ok(pool.busyRetryAfterSeconds("m") >= 1);
  pool.remove("w", w);
  assert.deepEqual(await Promise.all(queued), Array(MAX_WAITING_PER_SLOT).fill(undefined), "no worker left to wait for");
  busy.release();
  assert.equal(await pool.lease("other", {}, { waitMs: 5_000 }), undefined, "nobody hosts it: no wait");
});

test("a worker without a declared limit is never full", () => {
  const pool = new WorkerPool();
  pool.add(host("inproc"));
  for (let i = 0; i < 50; i++) assert.equal(pool.acquire("m")!.worker.address, "inproc");
});

test("removing a replaced connection's handle leaves its replacement", () => {
  const pool = new WorkerPool();
  const stale = host("w", 1);
  const fresh = host("w", 1);
  pool.add(stale);
  pool.add(fresh);
  pool.remove("w", stale);
  assert.deepEqual(pool.hosting("m"), [fresh]);
  pool.remove("w", fresh);
  assert.deepEqual(pool.hosting("m"), []);
});

test("jobs arriving one at a time rotate over idle workers", () => {
  const pool = new WorkerPool();
  for (const address of ["a", "b", "c"]) pool.add(host(address, 2));
  const served: string[] = [];
  for (let i = 0; i < 9; i++) {
    const lease = pool.acquire("m")!;
    served.push(lease.worker.address);
    lease.firstToken(lease.worker.address === "a" ? 5 : 50);
    lease.release();
  }
  // "a" answers ten times faster, yet each worker gets every third job.
  assert.deepEqual(served, ["a", "b", "c", "a", "b", "c", "a", "b", "c"]);
});

test("a request needing more context than its first pick holds can go to a worker with room", () => {
  const pool = new WorkerPool();
  pool.add({ ...host("small"), contextWindow: () => 2048 });
  pool.add({ ...host("large"), contextWindow: () => 8192 });
  assert.equal(pool.contextWindow("m"), 8192);
  assert.equal(pool.contextWindow("other"), 0);
  assert.equal(pool.acquire("m", { minContextWindow: 4000 })!.worker.address, "large");
  assert.equal(pool.acquire("m", { exclude: new Set(["large"]), minContextWindow: 4000 }), undefined);
});

test("a demoted worker gets a job only when no good worker is free, and a worker that keeps failing is removed", () => {
  const pool = new WorkerPool();
  const unfit: string[] = [];
  pool.onUnfit((worker) => unfit.push(worker.address));
  pool.add(host("good", 1));
  pool.add(host("bad", 4));
  const strike = () => {
    const lease = pool.acquire("m", { exclude: new Set(["good"]) })!;
    lease.outcome("stalled");
    lease.release();
  };
  strike();
  strike();
  assert.equal(pool.health("bad")?.standing, "demoted");
  assert.equal(pool.activeWorkers("m"), 2, "a demoted worker still serves the model");
  // Though "bad" has more free slots, the good worker is preferred while it has one.
  const first = pool.acquire("m")!;
  assert.equal(first.worker.address, "good");
  const second = pool.acquire("m")!;
  assert.equal(second.worker.address, "bad", "the good worker is full: the demoted one is the last resort");
  second.release();
  first.release();
  strike();
  strike();
  assert.deepEqual(unfit, ["bad"]);
  assert.deepEqual(pool.hosting("m").map((w) => w.address), ["good"]);
});

test("a request the queue ahead would keep past its wait is refused at once, by how long jobs hold their slots", async () => {
  const pool = new WorkerPool();
  pool.add(host("w", 1));
  const held = pool.acquire("m")!;
  await new Promise((resolve) => setTimeout(resolve, 60));
  held.release();
  const busy = pool.acquire("m")!;
  const quick = pool.lease("m", {}, { waitMs: 10 });
  assert.equal(pool.waiting("m"), 0, "not queued: one job ahead takes about 60 ms, more than it may wait");
  assert.equal(await quick, undefined);
  const patient = pool.lease("m", {}, { waitMs: 5_000 });
  assert.equal(pool.waiting("m"), 1);
  busy.release();
  (await patient)!.release();
});

test("a worker on probation gets no caller's job and is not sold; it takes checks one at a time until proven", () => {
  const pool = new WorkerPool({ checksToProve: 2 });
  pool.add(host("new", 8, false));
  assert.equal(pool.vetting("new"), "probation");
  assert.equal(pool.acquire("m"), undefined, "no caller's job");
  assert.deepEqual([pool.hostedModels().size, pool.activeWorkers("m"), pool.serving("m").length, pool.contextWindow("m")], [0, 0, 0, 0]);
  const check = pool.acquire("m", { onProbation: true })!;
  assert.equal(check.worker.address, "new");
  assert.equal(pool.acquire("m", { onProbation: true }), undefined, "one check at a time, whatever it declared");
  check.release();
  pool.checkPassed("new");
  assert.equal(pool.vetting("new"), "probation");
  pool.checkPassed("new");
  assert.equal(pool.vetting("new"), "proven");
  assert.deepEqual([...pool.hostedModels()], ["m"]);
  assert.equal(pool.activeWorkers("m"), 1);
  assert.equal(pool.acquire("m")!.worker.address, "new", "sold now");
  assert.equal(pool.acquire("m", { onProbation: true }), undefined, "no longer on probation");
});

test("a proven worker dropped for its faults comes back on probation; a reconnection alone keeps its record", () => {
  const pool = new WorkerPool({ checksToProve: 1 });
  pool.add(host("w", 4, false));
  pool.checkPassed("w");
  pool.remove("w");
  pool.add(host("w", 4, false));
  assert.equal(pool.vetting("w"), "proven", "kept across a reconnection");
  for (let i = 0; i < 4; i++) {
    const lease = pool.acquire("m")!;
    lease.outcome("failed");
    lease.release();
  }
  assert.equal(pool.health("w"), undefined, "dropped");
  pool.add(host("w", 4, false));
  assert.equal(pool.vetting("w"), "probation");
  assert.equal(pool.health("w")?.standing, "good", "its strikes were paid with its standing");
});

test("the operator's seed pool is vouched for; a second opinion goes to a vouched worker first", () => {
  const pool = new WorkerPool({ trust: new WorkerTrust(new Set(["seed"]), async () => 0n), checksToProve: 1 });
  pool.add(host("seed", 4, false));
  pool.add(host("proven", 4, false));
  pool.checkPassed("proven");
  assert.deepEqual([pool.vetting("seed"), pool.vetting("proven")], ["vouched", "proven"]);
  // Rotation would give "proven" the next job; a second opinion wants the vouched one.
  pool.acquire("m", { address: "seed" })!.release();
  assert.equal(pool.acquire("m", { vouchedFirst: true })!.worker.address, "seed");
});
