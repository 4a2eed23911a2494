/**
 * GET /docs/errors: the error reference that every error body's `docs` link points into, rendered
 * from docs/errors.md so the page and the repository's docs cannot drift apart.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { FastifyInstance } from "fastify";
import { PACKAGE_ROOT } from "../../core/index.ts";

const SOURCE = join(PACKAGE_ROOT, "docs", "errors.md");

function escape(text: string): string {
  return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/**
 * A Markdown link: absolute URLs stay links; a link to another file of docs/ keeps only its text,
 * since the gateway serves this one page of the docs, not the others.
 */
function renderLinks(escaped: string): string {
  return escaped.replace(/\[([^\]]+)\]\(([^)\s]+)\)/g, (_match, text: string, url: string) =>
    /^https?:\/\//.test(url) ? `<a href="${url.replace(/"/g, "&quot;")}">${text}</a>` : text,
  );
}

/** Just enough Markdown for that page: headings (anchored), indented code, paragraphs, `code`, links. */
export function renderErrorDocs(markdown: string): string {
  const html: string[] = [];
  for (const section of markdown.split(/\n\s*\n/)) {
    const [first = "", ...rest] = section.split("\n");
    const heading = /^(#{1,2}) (.+)$/.exec(first);
    if (heading) {
      const text = escape(heading[2]!);
      html.push(heading[1] === "#" ? `<h1>${text}</h1>` : `<h2 id="${text}">${text}</h2>`);
    }
    const block = heading ? rest.join("\n") : section;
    if (block.trim() === "") continue;
    if (block.startsWith("    ")) {
      html.push(`<pre>${escape(block.replace(/^ {4}/gm, ""))}</pre>`);
    } else {
      html.push(`<p>${renderLinks(escape(block.trim())).replace(/`([^`]+)`/g, "<code>$1</code>")}</p>`);
    }
  }
  return `<!doctype html><html><head><meta charset="utf-8"><title>Errors</title></head><body>${html.join("\n")}</body></html>`;
}

export async function errorDocRoutes(app: FastifyInstance): Promise<void> {
  const page = renderErrorDocs(readFileSync(SOURCE, "utf8"));
  app.get("/docs/errors", async (_request, reply) => reply.type("text/html; charset=utf-8").send(page));
}
