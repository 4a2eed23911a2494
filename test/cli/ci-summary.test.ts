/**
 * CI's summary line (.ci/summarize-tap, printed by .ci/run) from real output of node's test
 * runner: a skipped test, a skipped suite and a test that skips itself are all counted as
 * skipped, never as passed, and a failure as failed.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { after, test } from "node:test";
import { tempDir } from "../support/service.ts";

const run = promisify(execFile);
const dir = await tempDir("svc-ci-summary-");
after(() => dir.remove());

const FIXTURE = `
import { describe, it, test } from "node:test";
test("passes", () => {});
test("fails", () => { throw new Error("expected failure"); });
test("skipped", { skip: "no database" }, () => {});
describe("skipped suite", { skip: "DATABASE_URL not set" }, () => { it("a", () => {}); it("b", () => {}); });
describe("suite", () => { it("skips itself", (t) => { t.skip("later"); }); it("passes too", () => {}); });
`;

test("counts passed, failed and skipped, a skipped suite included", async () => {
  const file = join(dir.path, "fixture.test.mjs");
  await writeFile(file, FIXTURE);
  // The runner changes its output when it sees it runs under another runner; this one must not.
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  const tap = await run(process.execPath, ["--test", "--test-reporter=tap", file], { env }).then(
    () => assert.fail("the fixture has a failing test"),
    (error: { stdout: string }) => error.stdout,
  );
  assert.match(tap, /^# skipped 2$/m, "the runner's own total leaves the suite out");
  const tapFile = join(dir.path, "out.tap");
  await writeFile(tapFile, tap);
  const { stdout } = await run(".ci/summarize-tap", [tapFile]);
  assert.equal(stdout, "2 passed, 1 failed, 3 skipped\n");
});
