/**
 * The README promises Node 20: every package the lockfile installs must accept the running Node,
 * and the two held back by `overrides` in package.json (commander under @solana/errors, cookie
 * under light-my-request) must still do their jobs at the older versions.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { promisify } from "node:util";
import { test } from "node:test";
import Fastify from "fastify";

// semver comes with the tree (through node-llama-cpp and others) without type declarations; it is
// npm's own range matcher, so it judges `engines` exactly as npm ci does.
const semver = createRequire(import.meta.url)("semver") as { satisfies(version: string, range: string): boolean };

interface LockEntry {
  version?: string;
  engines?: { node?: string } | string[];
}

test("every package in the lockfile accepts the running Node", async () => {
  const lock = JSON.parse(await readFile("package-lock.json", "utf8")) as { packages: Record<string, LockEntry> };
  const refused: string[] = [];
  let checked = 0;
  for (const [where, entry] of Object.entries(lock.packages)) {
    const range = Array.isArray(entry.engines) ? undefined : entry.engines?.node;
    if (!range) continue;
    checked++;
    if (!semver.satisfies(process.versions.node, range)) refused.push(`${where}@${entry.version} wants node ${range}`);
  }
  assert.ok(checked > 20, `only ${checked} packages declare engines: is this the lockfile?`);
  assert.deepEqual(refused, [], `Node ${process.versions.node} is refused`);
});

test("fastify.inject (light-my-request) still sends cookies with the overridden cookie package", async () => {
  const app = Fastify();
  app.get("/echo", async (request) => ({ cookie: request.headers.cookie ?? null }));
  try {
    const res = await app.inject({ method: "GET", url: "/echo", cookies: { session: "abc 1", theme: "dark" } });
    assert.equal(res.statusCode, 200);
    // The value is percent-encoded by cookie's serializer: a space is not a valid cookie octet.
    assert.deepEqual(res.json(), { cookie: "session=abc%201; theme=dark" });
  } finally {
    await app.close();
  }
});

test("@solana/errors' decoder CLI (its only use of commander) still runs", async () => {
  const { stdout } = await promisify(execFile)(process.execPath, ["node_modules/@solana/errors/bin/cli.mjs", "decode", "--", "1"]);
  assert.match(stdout, /Solana error code #1/);
  assert.match(stdout, /progressed past the last block/);
});
