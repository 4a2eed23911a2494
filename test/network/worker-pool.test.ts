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
