/**
 * `svc worker` as a real child process, for tests and benchmarks. Every process started here is
 * remembered so an `after` hook can kill the lot even when an assertion failed midway: a live
 * child would keep the test process running forever.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { basename, dirname, join } from "node:path";
import { loadOrCreateKeypair } from "../../src/core/keys.ts";
import { MODEL } from "./service.ts";

const BIN = join(import.meta.dirname, "..", "..", "bin", "svc.js");
const started = new Set<ChildProcess>();

export interface WorkerProcess {
  child: ChildProcess;
  /** The worker's on-chain address, as it printed it. */
  address: string;
  output(): string;
  /** Resolves once the output (from `from` on) matches; rejects on timeout or exit. */
  waitFor(pattern: RegExp, options?: { from?: number; timeoutMs?: number }): Promise<RegExpExecArray>;
  exited(): Promise<number | null>;
}

export async function spawnWorker(input: { gateway: string; keypair: string; modelsDir: string; models?: string[]; args?: string[] }): Promise<WorkerProcess> {
  const models = (input.models ?? [`${MODEL}=builtin`]).flatMap((m) => ["--model", m]);
  const child = spawn(
    process.execPath,
    [BIN, "worker", "--gateway", input.gateway, "--keypair", input.keypair, "--models-dir", input.modelsDir, ...models, ...(input.args ?? [])],
    { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, LOG_LEVEL: "warn" } },
  );
  started.add(child);
  child.once("exit", () => started.delete(child));
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once("exit", (code) => resolve(code)));

  const waitFor = (pattern: RegExp, options: { from?: number; timeoutMs?: number } = {}) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(out.slice(options.from ?? 0));
        if (!match) return false;
        finish();
        resolve(match);
        return true;
      };
      const onExit = () => {
        if (check()) return;
        finish();
        reject(new Error(`svc worker exited before printing ${pattern}:\n${out}`));
      };
      const timer = setTimeout(() => {
        finish();
        reject(new Error(`svc worker did not print ${pattern}:\n${out}`));
      }, options.timeoutMs ?? 30_000);
      const poll = setInterval(check, 10);
      const finish = () => {
        clearTimeout(timer);
        clearInterval(poll);
        child.off("exit", onExit);
      };
      if (child.exitCode !== null || child.signalCode !== null) return onExit();
      child.once("exit", onExit);
      check();
    });

  const address = (await waitFor(/Worker address: (\w+)/))[1]!;
  return { child, address, output: () => out, waitFor, exited: () => exited };
}

/**
 * The address of the worker whose keypair is at `path` (a `.json` file), creating the key now if
 * missing, as `svc worker` would: a test can have the gateway vouch for a worker before it starts.
 */
export async function workerAddress(path: string): Promise<string> {
  return (await loadOrCreateKeypair(dirname(path), basename(path, ".json"))).address;
}

/** Kills every worker process still running (for `after` hooks). */
export function killWorkers(): void {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
}
