import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiError } from "../../src/core/errors.ts";
import { newId } from "../../src/core/ids.ts";
import { nextCursor, parseJobListQuery } from "../../src/jobs/job-list-query.ts";

const known = (id: string) => id === "m";

test("defaults and valid values", () => {
  assert.deepEqual(parseJobListQuery({}, known), { limit: 20 });
  const id = newId("job");
  assert.deepEqual(parseJobListQuery({ limit: "100", before: id, status: "settled", model: "m" }, known), {
    limit: 100,
    before: id,
    status: "settled",
    model: "m",
  });
});

test("bad values are 400 invalid_request naming the param", () => {
  const cases: [Record<string, unknown>, string][] = [
    [{ limit: "0" }, "limit"],
    [{ limit: "101" }, "limit"],
    [{ limit: "ten" }, "limit"],
    [{ status: "done" }, "status"],
    [{ model: "nope" }, "model"],
    [{ before: "abc" }, "before"],
    [{ after: "wh_01ARZ3NDEKTSV4RRFFQ69G5FAV" }, "after"],
    [{ before: newId("job"), after: newId("job") }, "before"],
  ];
  for (const [query, param] of cases) {
    assert.throws(() => parseJobListQuery(query, known), (e: unknown) => e instanceof ApiError && e.param === param && e.status === 400);
  }
});

test("ids sort in creation order", () => {
  const ids = Array.from({ length: 50 }, () => newId("job"));
  assert.deepEqual([...ids].sort(), ids);
});

test("next_cursor continues the direction asked: the oldest job going back, the newest going forward", () => {
  const page = ["job_3", "job_2", "job_1"]; // newest first, as every page is
  assert.equal(nextCursor({ limit: 3 }, page, true), "job_1");
  assert.equal(nextCursor({ limit: 3, before: "job_4" }, page, true), "job_1");
  assert.equal(nextCursor({ limit: 3, after: "job_0" }, page, true), "job_3");
  assert.equal(nextCursor({ limit: 3, after: "job_0" }, page, false), null);
  assert.equal(nextCursor({ limit: 3 }, [], true), null);
});
