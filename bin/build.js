// The build `svc` runs: src/ bundled by esbuild into dist/<fingerprint>/, made when the sources
// change and reused otherwise. Loading the sources through tsx instead cost an idle `svc dev`
// 40-80 MB more resident memory here, and a gateway 70-95 MB (docs/performance.md).
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "..");
const SOURCES = join(ROOT, "src");
const BUILDS = join(ROOT, "dist");
/** Builds other than the current one are removed once they are this old: a process may still run one. */
const STALE_BUILD_MS = 24 * 3600_000;

/**
 * The file to import: dist/<fingerprint>/main.js, built first if these sources have no build yet.
 * Processes starting at once may each build; each builds aside and the first rename wins.
 */
export async function builtEntry() {
  const { version } = await import("esbuild");
  const id = fingerprint(version);
  const dir = join(BUILDS, id);
  const entry = join(dir, "main.js");
  if (existsSync(entry)) return entry;
  const scratch = join(BUILDS, `.building-${process.pid}-${Date.now()}`);
  await bundle({ main: join(SOURCES, "cli", "main.ts"), ...THREAD_ENTRIES }, scratch);
  try {
    renameSync(scratch, dir);
  } catch (error) {
    rmSync(scratch, { recursive: true, force: true });
    if (!existsSync(entry)) throw error;
  }
  removeStaleBuilds(id);
  return entry;
}

/**
 * The first module of each worker thread the service starts, named as src/core/thread-module.ts
 * looks for it beside the code that starts it. A source directory without one is skipped.
 */
export const THREAD_ENTRIES = Object.fromEntries(
  [
    ["chain-thread-main", join(SOURCES, "chain", "chain-thread-main.ts")],
    ["rpc-thread-main", join(SOURCES, "chain", "rpc", "rpc-thread-main.ts")],
    ["token-count-thread-main", join(SOURCES, "inference", "token-count-thread-main.ts")],
  ].filter(([, source]) => existsSync(source)),
);

/** Bundles `entryPoints` (name -> source file) into `outdir`. */
export async function bundle(entryPoints, outdir) {
  const { build } = await import("esbuild");
  await build({
    entryPoints,
    outdir,
    bundle: true,
    splitting: true,
    format: "esm",
    platform: "node",
    target: "node20",
    packages: "external",
    // Class and function names stay as written: errors and logs show them.
    keepNames: true,
    sourcemap: "linked",
    // Traces need the map's lines, not a copy of the sources: that would only add to every process's memory.
    sourcesContent: false,
    logLevel: "error",
  });
}

/** A hash of every source file's path and bytes, and of the bundler's version. */
function fingerprint(esbuildVersion) {
  const hash = createHash("sha256").update(esbuildVersion).update(readFileSync(import.meta.filename));
  const files = readdirSync(SOURCES, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => join(entry.parentPath ?? entry.path, entry.name))
    .sort();
  for (const file of files) hash.update(file.slice(SOURCES.length)).update("\0").update(readFileSync(file));
  return hash.digest("hex").slice(0, 16);
}

function removeStaleBuilds(current) {
  for (const name of readdirSync(BUILDS)) {
    const path = join(BUILDS, name);
    if (name !== current && Date.now() - statSync(path).mtimeMs > STALE_BUILD_MS) rmSync(path, { recursive: true, force: true });
  }
}
