/**
 * A CPU profile's busy time by function, self and inclusive, with PGlite's WebAssembly frames
 * named. V8 names a frame of a module without a name section `wasm-function[N]`; PGlite's module
 * has none, but it exports about 2,000 of PostgreSQL's functions by name (for its extensions),
 * and N counts the module's imported functions first, as its export section does. So most of
 * PostgreSQL's own entry points (GetCachedPlan, ExecInsertIndexTuples, standard_planner...) show
 * by name; static functions keep their number.
 *
 * Run: node --import tsx bench/profile-summary.ts <file.cpuprofile> [rows=30] [function]
 * With a function's name, it prints that function's callees instead (inclusive, merged over every
 * place it was called from).
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
}

/** The names PGlite's module exports its functions under, by function index. */
function pgliteFunctionNames(): Map<number, string> {
  // The package exports no path to its module; it sits beside the entry point.
  const wasm = readFileSync(join(dirname(createRequire(import.meta.url).resolve("@electric-sql/pglite")), "pglite.wasm"));
  let at = 8;
  const leb = (): number => {
    let value = 0;
    for (let shift = 0; ; shift += 7) {
      const byte = wasm[at++]!;
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
    }
  };
  const skipName = () => (at += leb());
  const names = new Map<number, string>();
  let importedFunctions = 0;
  while (at < wasm.length) {
    const section = wasm[at++]!;
    const size = leb();
    const end = at + size;
    if (section === 2) importedFunctions = countImportedFunctions(leb, skipName, () => wasm[at++]!);
    if (section === 7) {
      for (let n = leb(); n > 0; n--) {
        const length = leb();
        const name = wasm.toString("utf8", at, at + length);
        at += length;
        const kind = wasm[at++]!;
        const index = leb();
        if (kind === 0) names.set(index, name);
      }
    }
    at = end;
  }
  if (importedFunctions === 0) throw new Error("PGlite's module imports no functions: its layout changed");
  return names;
}

/** Reads the import section (after its size) and counts the functions among the imports. */
function countImportedFunctions(leb: () => number, skipName: () => void, byte: () => number): number {
  let functions = 0;
  for (let n = leb(); n > 0; n--) {
    skipName();
    skipName();
    const kind = byte();
    if (kind === 0) {
      leb();
      functions++;
    } else if (kind === 1) {
      byte();
      const flags = byte();
      leb();
      if (flags & 1) leb();
    } else if (kind === 2) {
      const flags = byte();
      leb();
      if (flags & 1) leb();
    } else if (kind === 3) {
      byte();
      byte();
    } else {
      byte();
      leb();
    }
  }
  return functions;
}

function summarize(profile: Profile, rows: number, callee?: string): void {
  const wasmNames = pgliteFunctionNames();
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const nameOf = (node: ProfileNode): string => {
    const { functionName, url, lineNumber } = node.callFrame;
    const wasm = /^wasm-function\[(\d+)\]$/.exec(functionName);
    if (wasm) return wasmNames.get(Number(wasm[1])) ?? functionName;
    return url === "" ? functionName : `${functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}:${lineNumber + 1}`;
  };
  const selfUs = new Map<number, number>();
  profile.samples.forEach((id, i) => selfUs.set(id, (selfUs.get(id) ?? 0) + profile.timeDeltas[i]!));
  const idle = [...byId.values()].filter((n) => n.callFrame.functionName === "(idle)").reduce((sum, n) => sum + (selfUs.get(n.id) ?? 0), 0);
  const busyUs = [...selfUs.values()].reduce((a, b) => a + b, 0) - idle;
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const add = (map: Map<string, number>, key: string, us: number) => map.set(key, (map.get(key) ?? 0) + us);
  // Each node's time counts once for every distinct function on its stack (recursion counts once).
  const walk = (id: number, stack: string[], under: boolean): number => {
    const node = byId.get(id)!;
    const name = nameOf(node);
    const inside = under || name === callee;
    let total = selfUs.get(id) ?? 0;
    for (const child of node.children ?? []) total += walk(child, [...stack, name], inside);
    if (name === "(idle)" || name === "(root)") return total;
    add(self, name, selfUs.get(id) ?? 0);
    if (callee === undefined ? !stack.includes(name) : under && stack.at(-1) === callee) add(inclusive, name, total);
    return total;
  };
  walk(profile.nodes[0]!.id, [], false);
  const top = (map: Map<string, number>) => [...map].sort((a, b) => b[1] - a[1]).slice(0, rows);
  const line = ([name, us]: [string, number]) => `${((100 * us) / busyUs).toFixed(1).padStart(5)}%  ${name}`;
  console.log(`busy ${(busyUs / 1000).toFixed(0)} ms (idle ${(idle / 1000).toFixed(0)} ms); shares of busy time`);
  if (callee !== undefined) {
    console.log(`\ncalled by ${callee}, inclusive:`);
    for (const entry of top(inclusive)) console.log(line(entry));
    return;
  }
  console.log("\nself:");
  for (const entry of top(self)) console.log(line(entry));
  console.log("\ninclusive:");
  for (const entry of top(inclusive)) console.log(line(entry));
}

// Piped into `head`, the rest of the output has nowhere to go: stop quietly.
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code !== "EPIPE") throw error;
  process.exit(0);
});
const [file, rows, callee] = process.argv.slice(2);
if (file === undefined) {
  console.error("usage: node --import tsx bench/profile-summary.ts <file.cpuprofile> [rows=30] [function]");
  process.exit(2);
}
summarize(JSON.parse(readFileSync(file, "utf8")) as Profile, Number(rows ?? 30), callee);
