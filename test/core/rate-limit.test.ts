import assert from "node:assert/strict";
import { test } from "node:test";
import { RateLimiter, TokenBucket, parseRateLimit } from "../../src/core/rate-limit.ts";

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

test("a token bucket takes several tokens at once or none, and says how long until it could", () => {
  const t = 5_000;
  const bucket = new TokenBucket(100, 200, t);
  assert.ok(bucket.isFull(t));
  assert.equal(bucket.take(150, t), 0);
  assert.equal(bucket.take(100, t), 0.5, "50 tokens short at 100/s: half a second");
  assert.equal(bucket.take(50, t), 0, "the refused take took nothing");
  assert.equal(bucket.take(1, t), 0.01);
  assert.equal(bucket.take(100, t + 1_000), 0, "a second refills 100");
  assert.ok(!bucket.isFull(t + 1_000));
  assert.ok(bucket.isFull(t + 3_000), "refills up to the burst and no further");
  assert.equal(bucket.take(201, t + 10_000) > 0, true, "never holds more than the burst");
});

test("a rate limit as an operator writes it: <per second>:<burst> or off", () => {
  assert.deepEqual(parseRateLimit("500:1000"), { ratePerSecond: 500, burst: 1000 });
  assert.deepEqual(parseRateLimit("0.5:2"), { ratePerSecond: 0.5, burst: 2 });
  assert.equal(parseRateLimit("off"), false);
  for (const bad of ["", "500", "0:10", "10:0", "-1:5", "ten:5", "5:1.5", "off "]) assert.throws(() => parseRateLimit(bad), RangeError, bad);
});
