import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { SequencePool } from "../../src/inference/sequence-pool.ts";

describe("sequence pool", () => {
  it("hands out free slots, then serves waiters first come, first served", async () => {
    const pool = new SequencePool(["a"]);
    const first = await pool.acquire();
    assert.equal(first, "a");
    const order: string[] = [];
    const w1 = pool.acquire().then((s) => order.push(`w1:${s}`));
    const w2 = pool.acquire().then((s) => order.push(`w2:${s}`));
    assert.equal(pool.waitingCount, 2);
    pool.release("a");
    await w1;
    pool.release("a");
    await w2;
    assert.deepEqual(order, ["w1:a", "w2:a"]);
    pool.release("a");
    assert.equal(pool.freeCount, 1);
  });

  it("drops a waiter whose signal aborts, and answers null", async () => {
    const pool = new SequencePool([1]);
    await pool.acquire();
    const ac = new AbortController();
    const waiting = pool.acquire(ac.signal);
    ac.abort();
    assert.equal(await waiting, null);
    assert.equal(pool.waitingCount, 0);
    pool.release(1);
    assert.equal(pool.freeCount, 1, "the released slot is not given to the aborted waiter");
    assert.equal(await pool.acquire(AbortSignal.abort()), null);
  });

  it("fails waiters and later acquires once closed", async () => {
    const pool = new SequencePool([1]);
    await pool.acquire();
    const waiting = pool.acquire();
    pool.close(new Error("closed"));
    await assert.rejects(waiting, /closed/);
    await assert.rejects(pool.acquire(), /closed/);
  });
});
