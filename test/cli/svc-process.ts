/**
 * The `svc` command as a real child process, with what it printed on each stream kept apart: the
 * CLI tests assert what a person sees on the console, line by line, and how the process ends.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";

const BIN = join(import.meta.dirname, "..", "..", "bin", "svc.js");
const running = new Set<ChildProcess>();

export interface SvcProcess {
  child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first match in stdout + stderr; rejects if the process exits or time runs out first. */
  waitFor(pattern: RegExp, timeoutMs?: number): Promise<RegExpExecArray>;
  /** The exit code (null when killed by a signal) and the time since the start. */
  exited(): Promise<{ code: number | null; ms: number }>;
}

export function startSvc(args: string[], env: Record<string, string> = {}): SvcProcess {
  const startedAt = performance.now();
  const child = spawn(process.execPath, [BIN, ...args], { stdio: ["ignore", "pipe", "pipe"], env: { ...process.env, ...env } });
  running.add(child);
  let out = "";
  let err = "";
  const changed = new EventTarget();
  child.stdout!.on("data", (d: Buffer) => ((out += d.toString()), changed.dispatchEvent(new Event("data"))));
  child.stderr!.on("data", (d: Buffer) => ((err += d.toString()), changed.dispatchEvent(new Event("data"))));
  const exit = new Promise<{ code: number | null; ms: number }>((resolve) =>
    child.once("close", (code) => {
      running.delete(child);
      resolve({ code, ms: performance.now() - startedAt });
    }),
  );
  const waitFor = (pattern: RegExp, timeoutMs = 60_000) =>
    new Promise<RegExpExecArray>((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(out + err);
        if (match) done(() => resolve(match));
      };
      const timer = setTimeout(() => done(() => reject(new Error(`svc did not print ${pattern}:\n${out}${err}`))), timeoutMs);
      const done = (settle: () => void) => {
        clearTimeout(timer);
        changed.removeEventListener("data", check);
        settle();
      };
      changed.addEventListener("data", check);
      void exit.then(() => done(() => (pattern.exec(out + err) ? resolve(pattern.exec(out + err)!) : reject(new Error(`svc exited before printing ${pattern}:\n${out}${err}`)))));
      check();
    });
  return { child, stdout: () => out, stderr: () => err, waitFor, exited: () => exit };
}

/** Runs `svc` to its end. */
export async function runSvc(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; ms: number; stdout: string; stderr: string }> {
  const p = startSvc(args, env);
  const { code, ms } = await p.exited();
  return { code, ms, stdout: p.stdout(), stderr: p.stderr() };
}

/** Kills whatever is still running (for `after` hooks: a live child keeps the test process alive). */
export function killAll(): void {
  for (const child of running) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
}
