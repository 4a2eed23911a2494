/** The weighing rule of re-executions (network/worker-trust.ts), without a server. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { SEED_WEIGHT, WorkerTrust, weightedVerdict } from "../../src/network/worker-trust.ts";

const STAKE = 1_000_000_000n;

test("weightless votes settle nothing, however many agree", () => {
  const sybils = Array.from({ length: 500 }, () => ({ hash: "framed", weight: 0n }));
  assert.equal(weightedVerdict(0n, sybils), undefined);
  assert.equal(weightedVerdict(SEED_WEIGHT, sybils), undefined);
});

test("a vote settles a hash only when it outweighs the accused and every other hash together", () => {
  assert.equal(weightedVerdict(0n, [{ hash: "a", weight: STAKE }]), "a", "one stake outweighs an unstaked worker");
  assert.equal(weightedVerdict(STAKE, [{ hash: "a", weight: STAKE }]), undefined, "an equal stake does not outweigh it");
  assert.equal(weightedVerdict(STAKE, [{ hash: "a", weight: STAKE }, { hash: "a", weight: 1n }]), "a");
  assert.equal(weightedVerdict(0n, [{ hash: "a", weight: STAKE }, { hash: "b", weight: STAKE }]), undefined, "a tie settles nothing");
  assert.equal(weightedVerdict(0n, [{ hash: "a", weight: SEED_WEIGHT }, { hash: "b", weight: STAKE }, { hash: "b", weight: STAKE }]), "a", "the seed pool outweighs stakes");
  assert.equal(weightedVerdict(SEED_WEIGHT, [{ hash: "a", weight: SEED_WEIGHT }, { hash: "a", weight: SEED_WEIGHT }]), "a", "two seed workers outweigh one");
  assert.equal(weightedVerdict(SEED_WEIGHT, [...Array.from({ length: 9 }, () => ({ hash: "a", weight: 2n ** 63n }))]), undefined, "no u64 stake reaches the seed pool's weight");
});

test("a worker weighs its stake behind its word, the seed pool more, a stake that cannot be read nothing", async () => {
  const trust = new WorkerTrust(new Set(["seed"]), async (address) => {
    if (address === "down") throw new Error("the chain does not answer");
    return address === "staked" ? STAKE : 0n;
  });
  assert.deepEqual(
    await Promise.all(["seed", "staked", "fresh", "down"].map((a) => trust.weight(a))),
    [SEED_WEIGHT, STAKE, 0n, 0n],
  );
  assert.equal(trust.inSeedPool("seed"), true);
  assert.equal(trust.inSeedPool("staked"), false);
});
