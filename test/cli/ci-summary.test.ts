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

test("counts a test file that timed out as failed, though the runner's total leaves it out", async () => {
  const stuck = join(dir.path, "stuck.test.mjs");
  const fine = join(dir.path, "fine.test.mjs");
  // The event loop never turns again: only the parent runner's file timeout can end it.
  await writeFile(stuck, `import { test } from "node:test";\ntest("spins", async () => { await new Promise((r) => setTimeout(r, 50)); for (;;) {} });\n`);
  await writeFile(fine, `import { test } from "node:test";\ntest("passes", () => {});\n`);
  const env = { ...process.env };
  delete env.NODE_TEST_CONTEXT;
  const tap = await run(process.execPath, ["--test", "--test-reporter=tap", "--test-concurrency=1", "--test-timeout=1500", stuck, fine], { env }).then(
    (done) => done.stdout,
    (error: { stdout: string }) => error.stdout,
  );
  assert.match(tap, /^# fail 0$/m, "the runner's own total misses the file");
  const tapFile = join(dir.path, "timeout.tap");
  await writeFile(tapFile, tap);
  const { stdout } = await run(".ci/summarize-tap", [tapFile]);
  assert.equal(stdout, "1 passed, 1 failed, 0 skipped\n");
});

test("counts a run cut off before its totals as failed", async () => {
  const tapFile = join(dir.path, "cut.tap");
  await writeFile(tapFile, "TAP version 13\n# Subtest: a\nok 1 - a\n  ---\n  duration_ms: 1\n  ...\n# Subtest: b\n");
  const { stdout } = await run(".ci/summarize-tap", [tapFile]);
  assert.match(stdout, /ended before the runner's totals/);
  assert.match(stdout, /\n1 passed, 1 failed, 0 skipped\n$/);
});
