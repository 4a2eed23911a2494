// Types of bin/build.js for the TypeScript that imports it (benches).
export function builtEntry(): Promise<string>;
export function bundle(entryPoints: Record<string, string>, outdir: string): Promise<void>;
export const THREAD_ENTRIES: Record<string, string>;
