/**
 * The events part is handed facts: it reads no other part's records and writes no other part's
 * tables. Checked on the source text of every module of src/events, so a new import of jobs or
 * accounts (or any part besides core and store, ARCHITECTURE "talks to") fails here by name.
 */
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { dirname, join, relative, resolve } from "node:path";
import { test } from "node:test";
import { partOf as partOfPath, relativeSpecifiers as specifiers, sourceFiles, SRC } from "../support/source-imports.ts";

const EVENTS = join(SRC, "events");
/** Parts of src that events may import: its own files, shared helpers and the database handle. */
const ALLOWED_PARTS = new Set(["events", "core", "store"]);

async function eventsSources(): Promise<{ file: string; text: string }[]> {
  return Promise.all(sourceFiles(EVENTS).map(async (path) => ({ file: relative(EVENTS, path), text: await readFile(path, "utf8") })));
}

/** The part of src a specifier of `file` (a path under src/events) lands in. */
function partOf(file: string, specifier: string): string | undefined {
  return partOfPath(resolve(EVENTS, dirname(file), specifier));
}

test("the scanner sees the imports it is meant to police", async () => {
  const emit = (await eventsSources()).find((s) => s.file === "emit.ts");
  assert.ok(emit, "src/events/emit.ts exists");
  const found = specifiers(emit.text);
  assert.ok(found.includes("../store/index.ts") && found.includes("./outbox.ts"), `found: ${found.join(", ")}`);
  assert.equal(partOf("emit.ts", "../jobs/money.ts"), "jobs");
  assert.deepEqual(specifiers(`import type { A } from "../jobs/a.ts";\nexport { b } from '../accounts/b.ts';\nawait import("../web/c.ts");`), [
    "../jobs/a.ts",
    "../accounts/b.ts",
    "../web/c.ts",
  ]);
});

test("no module of src/events imports jobs, accounts or any part besides core and store", async () => {
  const sources = await eventsSources();
  assert.ok(sources.length >= 10, `read ${sources.length} files of src/events`);
  const crossings = sources.flatMap(({ file, text }) =>
    specifiers(text)
      .filter((s) => {
        const part = partOf(file, s);
        return part !== undefined && !ALLOWED_PARTS.has(part);
      })
      .map((s) => `src/events/${file} imports ${s}`),
  );
  assert.deepEqual(crossings, []);
});

test("no module of src/events writes the accounts part's wallets table", async () => {
  const writes = (await eventsSources()).flatMap(({ file, text }) =>
    [...text.matchAll(/\b(?:UPDATE|INSERT\s+INTO|DELETE\s+FROM)\s+wallets\b/gi)].map((m) => `src/events/${file}: ${m[0]}`),
  );
  assert.deepEqual(writes, []);
});
