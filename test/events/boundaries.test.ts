/**
 * The events part is handed facts: it reads no other part's records and writes no other part's
 * tables. Checked on the source text of every module of src/events, so a new import of jobs or
 * accounts (or any part besides core and store, ARCHITECTURE "talks to") fails here by name.
 */
import assert from "node:assert/strict";
import { readdir, readFile } from "node:fs/promises";
import { dirname, join, relative, resolve, sep } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), "../../src");
const EVENTS = join(SRC, "events");
/** Parts of src that events may import: its own files, shared helpers and the database handle. */
const ALLOWED_PARTS = new Set(["events", "core", "store"]);

async function eventsSources(): Promise<{ file: string; text: string }[]> {
  const names = (await readdir(EVENTS, { recursive: true })).filter((n) => n.endsWith(".ts"));
  return Promise.all(names.map(async (n) => ({ file: n, text: await readFile(join(EVENTS, n), "utf8") })));
}

/** Every module specifier in `import ... from`, `export ... from`, bare `import "x"` and `import("x")`. */
function specifiers(text: string): string[] {
  const found: string[] = [];
  for (const m of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)["']([^"']+)["']/g)) found.push(m[1]!);
  return found;
}

/** The part of src a relative specifier lands in, or undefined for a package or node builtin. */
function partOf(file: string, specifier: string): string | undefined {
  if (!specifier.startsWith(".")) return undefined;
  const target = relative(SRC, resolve(EVENTS, dirname(file), specifier));
  return target.startsWith("..") ? "(outside src)" : target.split(sep)[0];
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
