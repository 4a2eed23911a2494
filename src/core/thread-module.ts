/**
 * Where a worker thread starts. Run from the sources, a thread's first module is loaded before
 * any `--import` hook applies, so it starts at `<name>-entry.mjs` beside the caller, which
 * registers tsx and imports `<name>-main.ts`. In the build bin/svc.js runs, `<name>-main.js` is
 * an entry point of its own (bin/build.js THREAD_ENTRIES), written beside the caller's chunk.
 */
export function threadModule(callerUrl: string, name: string): URL {
  return callerUrl.endsWith(".ts") ? new URL(`./${name}-entry.mjs`, callerUrl) : new URL(`./${name}-main.js`, callerUrl);
}
