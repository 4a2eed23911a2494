import assert from "node:assert/strict";
import { test } from "node:test";
import { completionCost, maxTokensAffordable, planEscrow, TIERS } from "../../src/core/pricing.ts";
import { splitPayout } from "../../src/core/payout.ts";

test("cost is the flat rate up to 500 tokens, then the per-1k rate on the excess", () => {
  const standard = TIERS.standard; // 8 flat, 4 per 1k
  assert.equal(completionCost(standard, 0), 8);
  assert.equal(completionCost(standard, 500), 8);
  assert.equal(completionCost(standard, 501), 9); // ceil(1 * 4 / 1000) = 1
  assert.equal(completionCost(standard, 750), 9);
  assert.equal(completionCost(standard, 751), 10);
  assert.equal(completionCost(standard, 1500), 12);
  assert.equal(completionCost(TIERS.max, 4096), 40 + Math.ceil((3596 * 20) / 1000));
});

test("cost is monotonic and maxTokensAffordable is its inverse", () => {
  for (const rates of Object.values(TIERS)) {
    let previous = 0;
    for (let n = 0; n < 5000; n += 7) {
      const cost = completionCost(rates, n);
      assert.ok(cost >= previous);
      previous = cost;
    }
    for (let credits = rates.creditsPerRequest; credits < 200; credits++) {
      const n = maxTokensAffordable(rates, credits);
      assert.ok(completionCost(rates, n) <= credits, `cost(${n}) fits ${credits}`);
      assert.ok(completionCost(rates, n + 1) > credits, `cost(${n + 1}) exceeds ${credits}`);
    }
  }
  assert.equal(maxTokensAffordable(TIERS.lite, 1), 0);
});

test("escrow with max_tokens locks cost(max_tokens) or asks for exactly that", () => {
  const base = { rates: TIERS.pro, promptTokens: 10, contextWindow: 32_768 };
  assert.deepEqual(planEscrow({ ...base, availableCredits: 100, maxTokens: 1000 }), { ok: true, lockCredits: 23, maxTokens: 1000 });
  assert.deepEqual(planEscrow({ ...base, availableCredits: 22, maxTokens: 1000 }), { ok: false, creditsRequired: 23 });
});

test("escrow without max_tokens locks what the balance allows, capped at 4096 tokens", () => {
  const base = { rates: TIERS.lite, promptTokens: 100, contextWindow: 2048, maxTokens: undefined };
  // cap = min(4096, 2048 - 100) = 1948 tokens; cost = 2 + ceil(1448 / 1000) = 4
  assert.deepEqual(planEscrow({ ...base, availableCredits: 1000 }), { ok: true, lockCredits: 4, maxTokens: 1948 });
  // Only 3 credits: lock 3 and stop where cost reaches 3 (1500 tokens).
  assert.deepEqual(planEscrow({ ...base, availableCredits: 3 }), { ok: true, lockCredits: 3, maxTokens: 1500 });
  assert.deepEqual(planEscrow({ ...base, availableCredits: 1 }), { ok: false, creditsRequired: 2 });
});

test("payout shares are exact in base units", () => {
  assert.deepEqual(splitPayout(8, false), { worker: 60_000n, treasury: 20_000n });
  assert.deepEqual(splitPayout(8, true), { worker: 68_000n, treasury: 12_000n });
  assert.deepEqual(splitPayout(0, false), { worker: 0n, treasury: 0n });
});
