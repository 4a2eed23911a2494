/** Batches by key: handed over after the linger or once full, each item given its own result. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { LingeringBatches } from "../../src/core/lingering-batches.ts";

test("items of a key wait for the linger and are handed over together; other keys apart", async () => {
  const handed: string[][] = [];
  const batches = new LingeringBatches<string, string>(async (items) => {
    handed.push([...items]);
    return items.map((item) => item.toUpperCase());
  }, 30, 10);
  const results = await Promise.all([batches.add("a", "x"), batches.add("b", "y"), batches.add("a", "z")]);
  assert.deepEqual(results, ["X", "Y", "Z"]);
  assert.deepEqual(handed, [["x", "z"], ["y"]]);
});

test("a full batch goes at once, and flush hands over the rest without waiting", async () => {
  const handed: number[][] = [];
  const batches = new LingeringBatches<number, number>(async (items) => (handed.push([...items]), items.map((n) => n * 2)), 60_000, 2);
  const full = Promise.all([batches.add("k", 1), batches.add("k", 2)]);
  assert.deepEqual(await full, [2, 4]);
  const rest = batches.add("k", 3);
  batches.flush();
  assert.equal(await rest, 6);
  assert.deepEqual(handed, [[1, 2], [3]]);
});

test("a handler's error rejects every item of its batch", async () => {
  const batches = new LingeringBatches<number, number>(() => Promise.reject(new Error("refused")), 10, 5);
  const settled = await Promise.allSettled([batches.add("k", 1), batches.add("k", 2)]);
  assert.deepEqual(settled.map((s) => s.status), ["rejected", "rejected"]);
});
