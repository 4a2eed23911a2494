/**
 * autocannon in a process of its own: the load generator's event loop and CPU time are then not
 * the gateway's, as a caller's are not, and what the bench reads of the gateway's process (its CPU
 * a request, its event loop's busy share) is the gateway's alone.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import autocannon from "autocannon";

export interface LoadOptions {
  url: string;
  body: string;
  headers: Record<string, string>;
  connections: number;
  seconds: number;
}

/** What a run counted, as autocannon reports it. */
export interface LoadResult {
  requestsPerSecond: number;
  requests: number;
  p50: number;
  p99: number;
  answered: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  /** The load generator's own CPU time over the run, ms. */
  cpuMs: number;
}

/** Runs one load from a child process and resolves with what it counted. */
export function runLoad(options: LoadOptions): Promise<LoadResult> {
  const child = fork(fileURLToPath(import.meta.url), [], { execArgv: ["--import", "tsx"], env: { ...process.env, LOAD_GENERATOR: JSON.stringify(options) } });
  return new Promise((resolve, reject) => {
    child.once("message", (result: LoadResult) => {
      resolve(result);
      child.disconnect();
    });
    child.once("error", reject);
    child.once("exit", (code) => code !== 0 && reject(new Error(`the load generator exited with ${code}`)));
  });
}

async function generate(o: LoadOptions): Promise<LoadResult> {
  const cpu = process.cpuUsage();
  const r = await autocannon({ url: o.url, method: "POST", body: o.body, headers: { "content-type": "application/json", ...o.headers }, connections: o.connections, duration: o.seconds, timeout: 30 });
  return {
    requestsPerSecond: r.requests.average,
    requests: r.requests.total,
    p50: r.latency.p50,
    p99: r.latency.p99,
    answered: r["2xx"],
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    cpuMs: (() => {
      const used = process.cpuUsage(cpu);
      return (used.user + used.system) / 1000;
    })(),
  };
}

if (process.env.LOAD_GENERATOR && process.send) {
  process.send(await generate(JSON.parse(process.env.LOAD_GENERATOR) as LoadOptions));
}
