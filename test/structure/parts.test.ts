/**
 * The shape docs/architecture.md draws, checked on the source: one folder per part under src/,
 * and a part reached from outside only through its index.ts, so each part's surface is the one
 * file a newcomer reads. Type-only imports count too: they are how a part's types leak. And no
 * module reaches itself through the modules it loads: such a cycle through index files makes a
 * module read another's exports before they exist, a crash at start-up that types do not catch.
 */
import assert from "node:assert/strict";
import { readFileSync, statSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { test } from "node:test";
import ts from "typescript";
import { partOf, relativeSpecifiers as specifiers, sourceFiles, SRC } from "../support/source-imports.ts";

/** `file` importing `spec`: undefined when allowed, else why not. */
function crossing(file: string, spec: string): string | undefined {
  const target = resolve(dirname(file), spec);
  if (!target.startsWith(SRC + sep)) return undefined;
  const to = partOf(target);
  if (to === undefined || to === partOf(file)) return undefined;
  if (target === join(SRC, to, "index.ts")) return undefined;
  return `${relative(".", file)} imports ${spec}`;
}

test("every part is reached from outside only through its index.ts", () => {
  const files = sourceFiles(SRC);
  assert.ok(files.length > 150, `read ${files.length} files`);
  const crossings = files.flatMap((file) => specifiers(readFileSync(file, "utf8")).flatMap((spec) => crossing(file, spec) ?? []));
  assert.deepEqual(crossings, []);
});

test("every part that another part uses has an index.ts", () => {
  const used = new Set<string>();
  for (const file of sourceFiles(SRC)) {
    for (const spec of specifiers(readFileSync(file, "utf8"))) {
      const to = partOf(resolve(dirname(file), spec));
      if (to !== undefined && to !== "(outside src)" && to !== partOf(file)) used.add(to);
    }
  }
  const missing = [...used].filter((part) => !statSync(join(SRC, part, "index.ts"), { throwIfNoEntry: false }));
  assert.ok(used.size >= 10, `found ${used.size} parts used by others`);
  assert.deepEqual(missing, []);
});

test("the check finds a crossing", () => {
  // A file of jobs reaching into the ledger's internals, as it might be written by mistake.
  const file = join(SRC, "jobs", "example.ts");
  assert.equal(crossing(file, "../ledger/transfers.ts"), `${join("src", "jobs", "example.ts")} imports ../ledger/transfers.ts`);
  assert.equal(crossing(file, "../ledger/index.ts"), undefined);
  assert.equal(crossing(file, "./job-repo.ts"), undefined);
  assert.deepEqual(specifiers(`import { a } from "../x/y.ts";\nexport { b } from "./z.ts";\nconst m = await import("../w/v.ts");`), ["../x/y.ts", "./z.ts", "../w/v.ts"]);
});

/** The modules a file loads at run time: imports and re-exports that are not type-only. */
function loadedModules(file: string): string[] {
  const source = ts.createSourceFile(file, readFileSync(file, "utf8"), ts.ScriptTarget.Latest, false);
  const loaded: string[] = [];
  for (const statement of source.statements) {
    if (!(ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement))) continue;
    const spec = statement.moduleSpecifier;
    if (!spec || !ts.isStringLiteral(spec) || !spec.text.startsWith(".")) continue;
    if (ts.isExportDeclaration(statement) ? statement.isTypeOnly : typeOnlyImport(statement)) continue;
    loaded.push(resolve(dirname(file), spec.text));
  }
  return loaded;
}

function typeOnlyImport(statement: ts.ImportDeclaration): boolean {
  const clause = statement.importClause;
  if (!clause) return false;
  if (clause.isTypeOnly) return true;
  const bindings = clause.namedBindings;
  return !clause.name && bindings !== undefined && ts.isNamedImports(bindings) && bindings.elements.length > 0 && bindings.elements.every((e) => e.isTypeOnly);
}

/** One module of each cycle of the run-time import graph, with the path back to itself. */
function importCycles(files: string[]): string[] {
  return circles(new Map(files.map((file) => [file, loadedModules(file)])));
}

test("no module loads itself back through what it imports", () => {
  assert.deepEqual(importCycles(sourceFiles(SRC)), []);
});

/**
 * The parts from the bottom up, as docs/architecture.md draws them: a part may use the parts of
 * lower layers only. An arrow up (http reading the web app's options, say) makes the lower part
 * depend on what is built on it, and a change above ripple down.
 */
const LAYERS: readonly (readonly string[])[] = [
  ["core"],
  ["store", "bus", "tracing"],
  ["catalog"],
  ["accounts", "chain", "events", "ledger", "nodes", "inference", "idempotency"],
  ["network", "verify", "wallets"],
  ["jobs", "worker", "admin"],
  ["http"],
  ["web", "metrics"],
  ["cli"],
];

const layerOf = (part: string): number => LAYERS.findIndex((layer) => layer.includes(part));

/** Every import from one part to another that does not point to a lower layer, as "from -> to (file)". */
function arrowsUp(edges: readonly { from: string; to: string; file: string }[]): string[] {
  return edges.filter(({ from, to }) => !(layerOf(to) >= 0 && layerOf(to) < layerOf(from))).map(({ from, to, file }) => `${from} -> ${to} (${file})`);
}

function partEdges(): { from: string; to: string; file: string }[] {
  return sourceFiles(SRC).flatMap((file) => {
    const from = partOf(file);
    if (from === undefined) return [];
    return specifiers(readFileSync(file, "utf8")).flatMap((spec) => {
      const to = partOf(resolve(dirname(file), spec));
      return to === undefined || to === from || to === "(outside src)" ? [] : [{ from, to, file: relative(SRC, file) }];
    });
  });
}

test("every part is in a layer, and imports only from lower layers", () => {
  const parts = new Set(sourceFiles(SRC).map(partOf).filter((p): p is string => p !== undefined && p !== "(outside src)"));
  assert.deepEqual([...parts].filter((part) => layerOf(part) < 0), [], "parts missing from LAYERS");
  assert.deepEqual(arrowsUp(partEdges()), []);
});

test("the check finds an arrow up and an import circle, type imports included", () => {
  assert.deepEqual(arrowsUp([{ from: "http", to: "web", file: "http/context.ts" }, { from: "web", to: "http", file: "web/index.ts" }]), ["http -> web (http/context.ts)"]);
  const a = join(SRC, "store", "db.ts");
  const b = join(SRC, "store", "pglite.ts");
  assert.deepEqual(circles(new Map([[a, [b]], [b, [a]]])), ["store/db.ts -> store/pglite.ts -> store/db.ts"]);
});

/** Every module's relative imports, type-only ones included. */
function allImports(): Map<string, string[]> {
  return new Map(sourceFiles(SRC).map((file) => [file, specifiers(readFileSync(file, "utf8")).map((spec) => resolve(dirname(file), spec))]));
}

/** One module of each circle of `graph`, with the path back to itself. */
function circles(graph: Map<string, string[]>): string[] {
  const done = new Set<string>();
  const found: string[] = [];
  const visit = (file: string, path: string[]): void => {
    if (path.includes(file)) return void found.push(path.slice(path.indexOf(file)).concat(file).map((f) => relative(SRC, f)).join(" -> "));
    if (done.has(file) || !graph.has(file)) return;
    for (const next of graph.get(file)!) visit(next, [...path, file]);
    done.add(file);
  };
  for (const file of graph.keys()) visit(file, []);
  return found;
}

test("no module imports itself back, even for its types: each file reads as a whole without its importers", () => {
  assert.deepEqual(circles(allImports()), []);
});
