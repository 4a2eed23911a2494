import assert from "node:assert/strict";
import { test } from "node:test";
import { ModelOutages } from "../../src/network/model-outages.ts";
import { WorkerPool } from "../../src/network/worker-pool.ts";
import type { WorkerHandle } from "../../src/network/worker-handle.ts";

test("retry_after comes from the outages this gateway measured", () => {
  let now = 0;
  const outages = new ModelOutages(() => now);
  assert.equal(outages.retryAfterSeconds("m"), 60, "never served here");

  outages.hosted("m");
  outages.unhosted("m");
  assert.equal(outages.retryAfterSeconds("m"), 5, "a fresh outage with no history: workers usually reconnect fast");

  now = 20_000; // that outage lasted 20 s
  outages.hosted("m");
  outages.unhosted("m");
  now += 8_000;
  assert.equal(outages.retryAfterSeconds("m"), 12, "20 s typical, 8 s gone");

  now += 30_000; // 38 s into an outage that outlasted the typical one: back off by as long again
  assert.equal(outages.retryAfterSeconds("m"), 38);
  now += 10 * 60_000;
  assert.equal(outages.retryAfterSeconds("m"), 300, "capped");
});

test("the pool opens an outage when a model's last worker leaves, not before", () => {
  let now = 0;
  const pool = new WorkerPool({ outages: new ModelOutages(() => now) });
  const worker = (address: string): WorkerHandle => ({
    address,
    // Staked, so it is sold: a worker on probation hosts nothing callers can buy.
    staked: true,
    models: () => ["m"],
    contextWindow: () => 2048,
    countPromptTokens: async () => 1,
    run: async function* () {},
    signSettlement: () => Promise.reject(new Error("the pool never asks for a settlement")),
  });
  pool.add(worker("a"));
  pool.add(worker("b"));
  pool.remove("a");
  now = 50_000;
  pool.add(worker("a")); // "b" never left, so no outage was recorded
  pool.remove("a");
  pool.remove("b");
  assert.equal(pool.retryAfterSeconds("m"), 5);
  now += 4_000;
  pool.add(worker("a"));
  pool.remove("a");
  now += 1_000;
  assert.equal(pool.retryAfterSeconds("m"), 3, "one 4 s outage measured, 1 s into this one");
});
