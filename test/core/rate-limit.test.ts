import assert from "node:assert/strict";
import { test } from "node:test";
import { RateLimiter } from "../../src/core/rate-limit.ts";

test("a burst is allowed, then requests wait for the refill", () => {
  const limiter = new RateLimiter({ ratePerSecond: 10, burst: 3 });
  const t = 1_000_000;
  assert.equal(limiter.take("a", t), 0);
  assert.equal(limiter.take("a", t), 0);
  assert.equal(limiter.take("a", t), 0);
  assert.equal(limiter.take("a", t), 1, "fourth request in the same instant is refused");
  assert.equal(limiter.take("b", t), 0, "another address has its own bucket");
  assert.equal(limiter.take("a", t + 100), 0, "one token back after 100 ms at 10/s");
  assert.equal(limiter.take("a", t + 100), 1);
});
