/**
 * The app's page and bundle, built from web/ by esbuild in memory when the process first needs
 * them. Building at start instead of at install means `npm ci && npm start` serves the app with no
 * extra step and a bundle can never be stale; it takes a fraction of a second, once per process.
 */
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import type { FastifyInstance, FastifyReply } from "fastify";
import { PACKAGE_ROOT } from "../core/index.ts";

export const WEB_DIR = join(PACKAGE_ROOT, "web");

export interface AppBundle {
  html: string;
  js: string;
  css: string;
  /** A hash of the bundle: the assets' URLs carry it, so a browser never mixes two builds. */
  version: string;
}

let built: Promise<AppBundle> | undefined;

export function appBundle(): Promise<AppBundle> {
  built ??= buildAppBundle();
  return built;
}

async function buildAppBundle(): Promise<AppBundle> {
  const { build } = await import("esbuild");
  const result = await build({
    entryPoints: { app: join(WEB_DIR, "src", "main.tsx") },
    bundle: true,
    minify: true,
    format: "esm",
    target: "es2022",
    jsx: "automatic",
    jsxImportSource: "preact",
    legalComments: "none",
    write: false,
    outdir: "/out",
    logLevel: "silent",
  });
  const file = (ext: string) => result.outputFiles.find((f) => f.path.endsWith(ext))?.text ?? "";
  const js = file(".js");
  const css = file(".css");
  const version = createHash("sha256").update(js).update(css).digest("hex").slice(0, 12);
  const html = (await readFile(join(WEB_DIR, "index.html"), "utf8")).replaceAll("{{version}}", version);
  return { html, js, css, version };
}

/** The page may run only its own script and talk only to its own origin. */
const PAGE_HEADERS = {
  "content-security-policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
};

function send(reply: FastifyReply, type: string, body: string, cache: string): FastifyReply {
  return reply.headers({ ...PAGE_HEADERS, "cache-control": cache }).type(type).send(body);
}

/** GET / (the page) and its two assets; every other path of the app is the same page. */
export function registerAppPage(app: FastifyInstance): void {
  const immutable = "public, max-age=31536000, immutable";
  app.get("/", async (_request, reply) => send(reply, "text/html; charset=utf-8", (await appBundle()).html, "no-cache"));
  app.get("/assets/app-:version.js", async (_request, reply) => send(reply, "text/javascript; charset=utf-8", (await appBundle()).js, immutable));
  app.get("/assets/app-:version.css", async (_request, reply) => send(reply, "text/css; charset=utf-8", (await appBundle()).css, immutable));
}
