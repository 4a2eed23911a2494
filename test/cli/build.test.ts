/**
 * bin/build.js, the build `svc` runs: tried on a small project of its own in a temporary directory
 * (bin/build.js copied there, node_modules linked), so that its builds and their clean-up never
 * touch this checkout's dist/.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { access, cp, mkdir, mkdtemp, readFile, readdir, rm, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, test } from "node:test";
import { promisify } from "node:util";

const run = promisify(execFile);
let project: string;

/** What `builtEntry` returns in a fresh process, and the output of importing it. */
async function buildAndRun(): Promise<{ entry: string; output: string }> {
  const script = `import { builtEntry } from "./bin/build.js"; const e = await builtEntry(); console.log(e); await import(e);`;
  const { stdout } = await run(process.execPath, ["--input-type=module", "-e", script], { cwd: project });
  const [entry, ...output] = stdout.trim().split("\n");
  return { entry: entry!, output: output.join("\n") };
}

const builds = async () => (await readdir(join(project, "dist"))).sort();

before(async () => {
  project = await mkdtemp(join(tmpdir(), "svc-build-"));
  await mkdir(join(project, "bin"));
  await cp("bin/build.js", join(project, "bin", "build.js"));
  await symlink(join(process.cwd(), "node_modules"), join(project, "node_modules"));
  await mkdir(join(project, "src", "cli"), { recursive: true });
  await mkdir(join(project, "src", "chain"), { recursive: true });
  await writeFile(join(project, "src", "cli", "greeting.ts"), `export const greeting: string = "hello";\n`);
  await writeFile(join(project, "src", "cli", "main.ts"), `import { greeting } from "./greeting.ts";\nconsole.log(greeting);\n`);
  await writeFile(join(project, "src", "chain", "chain-thread-main.ts"), `export const thread = 1;\n`);
});

after(async () => {
  await rm(project, { recursive: true, force: true });
});

test("the sources are built once and the build is reused while they are unchanged", async () => {
  const first = await buildAndRun();
  assert.equal(first.output, "hello");
  assert.match(first.entry, /dist\/[0-9a-f]{16}\/main\.js$/);
  const second = await buildAndRun();
  assert.equal(second.entry, first.entry);
  assert.equal((await builds()).length, 1);
});

test("processes starting at once agree on one build and leave no scratch directory", async () => {
  await writeFile(join(project, "src", "cli", "greeting.ts"), `export const greeting: string = "hello again";\n`);
  const results = await Promise.all([buildAndRun(), buildAndRun(), buildAndRun()]);
  assert.deepEqual(new Set(results.map((r) => r.entry)).size, 1);
  assert.deepEqual(results.map((r) => r.output), ["hello again", "hello again", "hello again"]);
  const names = await builds();
  assert.equal(names.filter((name) => name.startsWith(".")).length, 0, `scratch left behind: ${names.join(", ")}`);
});

test("a change to the sources makes a new build; builds a day old are removed, newer ones kept", async () => {
  const before = await builds();
  assert.equal(before.length, 2);
  const dayAgo = new Date(Date.now() - 25 * 3600_000);
  await utimes(join(project, "dist", before[0]!), dayAgo, dayAgo);
  await writeFile(join(project, "src", "cli", "greeting.ts"), `export const greeting: string = "changed";\n`);
  const changed = await buildAndRun();
  assert.equal(changed.output, "changed");
  const after = await builds();
  assert.equal(after.length, 2);
  assert.ok(!after.includes(before[0]!), "the day-old build was removed");
  assert.ok(after.includes(before[1]!), "the recent build was kept");
});

test("every thread the sources start is an entry point of the build, with its tsx entry beside it", async () => {
  const { THREAD_ENTRIES } = await import("../../bin/build.js");
  const sources = (await readdir("src", { recursive: true })).filter((file) => file.endsWith(".ts"));
  const started: string[] = [];
  for (const file of sources) {
    const text = await readFile(join("src", file), "utf8");
    for (const [, name] of text.matchAll(/threadModule\(import\.meta\.url, "([a-z-]+)"\)/g)) {
      started.push(name!);
      const dir = join(process.cwd(), "src", dirname(file));
      assert.equal(THREAD_ENTRIES[`${name}-main`], join(dir, `${name}-main.ts`), `${file} starts ${name}`);
      await access(join(dir, `${name}-entry.mjs`));
    }
  }
  assert.deepEqual(started.sort(), ["chain-thread", "rpc-thread", "token-count-thread"]);
});
