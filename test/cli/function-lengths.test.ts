/**
 * The function-length check (`npm run check:lengths`): it finds a function one line over the limit
 * and none at it, and every function of the service and the web app stays within 70 lines.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { longFunctions, sourceFiles } from "../../scripts/function-lengths.ts";

function body(lines: number): string {
  return Array.from({ length: lines - 2 }, (_, i) => `  const v${i} = ${i};`).join("\n");
}

test("a function of 71 lines is reported with its name and length; one of 70 is not", () => {
  const text = [
    `export function atLimit(): void {\n${body(70)}\n}`,
    `class Holder {\n  overLimit(): void {\n${body(71)}\n  }\n}`,
    `const arrow = () => {\n${body(72)}\n};`,
  ].join("\n");
  const found = longFunctions("sample.ts", 70, text);
  assert.deepEqual(
    found.map((f) => [f.name, f.lines]),
    [["overLimit", 71], ["arrow", 72]],
  );
});

test("no function of the service (src) or of the web app (web) is over 70 lines", () => {
  const files = ["src", "web"].flatMap(sourceFiles);
  assert.ok(files.length > 150, `read ${files.length} files`);
  const long = files.flatMap((file) => longFunctions(file, 70));
  assert.deepEqual(long.map((f) => `${f.file}:${f.line} ${f.name} (${f.lines} lines)`), []);
});
