/** Routing respects the concurrency each worker declared, and never refuses while a host exists. */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { WorkerHandle } from "../../src/network/worker-handle.ts";
import { WorkerPool, type WorkerLease } from "../../src/network/worker-pool.ts";

/** Routing reads only a worker's address, models, concurrency and stake. */
function host(address: string, concurrency?: number): WorkerHandle {
  return {
    address,
    staked: false,
    ...(concurrency !== undefined ? { concurrency } : {}),
    models: () => ["m"],
    contextWindow: () => 2048,
    countPromptTokens: () => Promise.resolve(1),
    run: () => (async function* () {})(),
  };
}

test("a full worker is skipped; when all are full the least loaded takes the job", () => {
  const pool = new WorkerPool();
  pool.add(host("small", 1));
  pool.add(host("big", 3));
  const leases: WorkerLease[] = [];
  const take = () => {
    const lease = pool.acquire("m")!;
    leases.push(lease);
    return lease.worker.address;
  };
  // Least outstanding first; "small" is full after its one job, so "big" takes the next three.
  assert.deepEqual([take(), take(), take(), take()].sort(), ["big", "big", "big", "small"]);
  // Both full at 1/1 and 3/3: equal load, then fewer outstanding jobs wins; then the lighter load.
  assert.equal(take(), "small");
  assert.equal(take(), "big", "3/3 is a lighter load than 2/1");
  assert.equal(pool.outstanding("small"), 2);
  assert.equal(pool.outstanding("big"), 4);
  for (const lease of leases) lease.release();
  assert.equal(pool.outstanding("small") + pool.outstanding("big"), 0);
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
  assert.equal(pool.acquire("m", undefined, 4000)!.worker.address, "large");
  assert.equal(pool.acquire("m", new Set(["large"]), 4000), undefined);
});

test("a demoted worker gets a job only when no good worker is free, and a worker that keeps failing is removed", () => {
  const pool = new WorkerPool();
  const unfit: string[] = [];
  pool.onUnfit((worker) => unfit.push(worker.address));
  pool.add(host("good", 1));
  pool.add(host("bad", 4));
  const strike = () => {
    const lease = pool.acquire("m", new Set(["good"]))!;
    lease.outcome("stalled");
    lease.release();
  };
  strike();
  strike();
  assert.equal(pool.health("bad")?.standing, "demoted");
  assert.equal(pool.activeWorkers("m"), 1, "only the good worker counts as capacity");
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
