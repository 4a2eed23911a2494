/**
 * The memory of an idle `svc dev`: the command `npm start` runs (`bin/svc.js dev`, its bundle,
 * with the start script's environment and Node flags) started on a new data dir, then started
 * again on the same dir, each read with `ps` 20, 60, 90 and 120 s after it printed its banner,
 * with nothing sent to it. V8 gives back its unused young generation only once the process has
 * been idle a while, so the later readings are the idle figure; the first shows a process just
 * started.
 *
 * Run: npm run bench:idle-memory [-- <starts of each kind, default 1>]
 */
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";

const STARTS = Number(process.argv[2] ?? 1);
const READ_AT_SECONDS = [20, 60, 90, 120];
const SVC = fileURLToPath(new URL("../bin/svc.js", import.meta.url));
/** package.json's start script (`[VAR=value ...] node [flags] bin/svc.js dev`): measured as `npm start` runs it. */
const START = startScript();
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves once the banner is printed (its base URL line), with the time it took. */
function startDev(dataDir: string): Promise<{ child: ChildProcess; readyMs: number }> {
  const started = performance.now();
  const args = [...START.flags, SVC, "dev", "--data-dir", dataDir, "--port", "0", "--rpc-port", "0", "--log-format", "json"];
  const child = spawn(process.execPath, args, { env: { ...process.env, ...START.env }, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (!output.includes("Base URL:")) return;
      child.stdout!.off("data", onData);
      child.stdout!.resume();
      resolve({ child, readyMs: performance.now() - started });
    };
    child.stdout!.on("data", onData);
    child.stderr!.resume();
    child.once("exit", (code) => reject(new Error(`svc dev exited with ${code} before it was ready:\n${output}`)));
  });
}

function startScript(): { text: string; env: Record<string, string>; flags: string[] } {
  const manifest = JSON.parse(readFileSync(fileURLToPath(new URL("../package.json", import.meta.url)), "utf8")) as { scripts: { start: string } };
  const text = manifest.scripts.start;
  const words = text.split(/\s+/);
  const node = words.indexOf("node");
  const script = words.indexOf("bin/svc.js");
  const assignments = words.slice(0, Math.max(node, 0)).map((word) => /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(word));
  if (node < 0 || script < node || assignments.some((a) => a === null)) throw new Error(`the start script is not "[VAR=value ...] node [flags] bin/svc.js ...": ${text}`);
  return { text, env: Object.fromEntries(assignments.map((a) => [a![1]!, a![2]!])), flags: words.slice(node + 1, script) };
}

function rssKib(pid: number): number {
  return Number(execFileSync("ps", ["-o", "rss=", "-p", String(pid)]).toString());
}

async function measureStart(label: string, dataDir: string): Promise<string> {
  const { child, readyMs } = await startDev(dataDir);
  const readings: string[] = [];
  let waitedS = 0;
  for (const at of READ_AT_SECONDS) {
    await sleep((at - waitedS) * 1000);
    waitedS = at;
    const kib = rssKib(child.pid!);
    readings.push(`${at} s: ${Math.round(kib / 1024)} MiB (${Math.round((kib * 1024) / 1e6)} MB)`);
  }
  const exited = new Promise((resolve) => child.once("exit", resolve));
  child.kill("SIGINT");
  await exited;
  return `${label.padEnd(12)} ready after ${(readyMs / 1000).toFixed(1)} s; RSS ${readings.join(", ")}`;
}

const lines: string[] = [];
for (let i = 0; i < STARTS; i++) {
  const dir = await mkdtemp(join(tmpdir(), "svc-idle-memory-"));
  try {
    for (const label of ["first start", "later start"]) {
      const load = loadavg()[0]!.toFixed(2);
      const line = `${await measureStart(label, dir)}; load average ${load} before`;
      console.log(line);
      lines.push(line);
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
console.log(`\nidle svc dev (${START.text}), RSS read with ps after its banner (target: under 250 MB):\n${lines.join("\n")}`);
