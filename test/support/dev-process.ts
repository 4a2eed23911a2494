/**
 * `svc dev` as a real child process, for tests that kill and restart it. Every process started
 * here is remembered so an `after` hook can kill the lot even when an assertion failed midway.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { createServer } from "node:net";
import { join } from "node:path";

const BIN = join(import.meta.dirname, "..", "..", "bin", "svc.js");
const started = new Set<ChildProcess>();

export interface Dev {
  child: ChildProcess;
  baseUrl: string;
  /** Printed on the first start only. */
  apiKey: string | undefined;
  output: () => string;
}

/** Start `svc dev` on `dataDir` and wait for it to print its base URL. */
export function startDev(dataDir: string, extra: string[] = []): Promise<Dev> {
  const child = spawn(process.execPath, [BIN, "dev", "--data-dir", dataDir, "--port", "0", ...extra], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, LOG_LEVEL: "warn", DATABASE_URL: "" },
  });
  started.add(child);
  child.once("exit", () => started.delete(child));
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`svc dev did not start:\n${out}`)), 60_000);
    child.on("exit", (code) => reject(new Error(`svc dev exited with ${code}:\n${out}`)));
    const poll = setInterval(() => {
      if (!out.includes("Press Ctrl-C")) return;
      clearInterval(poll);
      clearTimeout(timer);
      resolve({ child, baseUrl: /Base URL: (\S+)/.exec(out)![1]!, apiKey: /API key: (svc_live_\w+)/.exec(out)?.[1], output: () => out });
    }, 20);
  });
}

export function exited(child: ChildProcess): Promise<number | null> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve(child.exitCode);
    else child.once("exit", (code) => resolve(code));
  });
}

/** Kills every `svc dev` still running (for `after` hooks). */
export function killDevs(): void {
  for (const child of started) if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
}

/** A port free right now, so a restarted gateway can listen where its workers dial back. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}
