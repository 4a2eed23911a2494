import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { ERROR_CODES } from "../../src/core/errors.ts";
import { renderErrorDocs } from "../../src/http/routes/error-docs.ts";

test("the error reference has an anchor for every code the API can answer", () => {
  const page = renderErrorDocs(readFileSync(join(import.meta.dirname, "..", "..", "docs", "errors.md"), "utf8"));
  for (const [code, info] of Object.entries(ERROR_CODES)) {
    assert.ok(page.includes(`<h2 id="${code}">`), `anchor for ${code}`);
    const section = page.slice(page.indexOf(`<h2 id="${code}">`)).split("<h2")[1]!;
    assert.ok(section.includes(String(info.status)), `${code} documents status ${info.status}`);
    assert.ok(section.includes(info.type), `${code} documents type ${info.type}`);
  }
});

test("links render as links to absolute URLs and as plain text to other docs files the gateway does not serve", () => {
  const page = renderErrorDocs("# Errors\n\nSee [the app](app.md) and [the spec](https://example.com/a?b=1).\n");
  assert.ok(page.includes("See the app and"), page);
  assert.ok(page.includes('<a href="https://example.com/a?b=1">the spec</a>'), page);
  assert.ok(!page.includes("]("), "no raw Markdown link left");
  const served = renderErrorDocs(readFileSync(join(import.meta.dirname, "..", "..", "docs", "errors.md"), "utf8"));
  assert.ok(!served.includes("]("), "docs/errors.md renders without raw Markdown links");
});
