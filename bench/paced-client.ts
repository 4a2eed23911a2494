/**
 * A caller sending chat completions open-loop at a fixed rate, from a process of its own: request
 * i starts at i / rate seconds whether or not the ones before have been answered, so a slow
 * gateway meets the same arrivals as a fast one instead of slowing its own load down (a closed
 * loop would), and the caller's event loop and CPU time are not the gateway's.
 */
import { fork } from "node:child_process";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import OpenAI from "openai";
import { BENCH_MESSAGES, percentile } from "./support.ts";

export interface PacedLoad {
  baseUrl: string;
  apiKey: string;
  model: string;
  /** Requests started a second. */
  rate: number;
  seconds: number;
  maxTokens: number;
  /** Streamed completions, each read to its last chunk (default false: JSON replies). */
  stream?: boolean;
}

export interface PacedResult {
  sent: number;
  succeeded: number;
  failed: number;
  /** Failed requests by what went wrong (HTTP status and error code, or the error's name). */
  failures: Record<string, number>;
  /** Answered requests' latency, ms. */
  p50Ms: number;
  p99Ms: number;
  /** How far the latest start fell behind its schedule, ms: the caller itself could not keep up past a few. */
  maxLagMs: number;
}

/** Runs `load` from a child process and resolves with what it counted once every request has ended. */
export function drivePaced(load: PacedLoad): Promise<PacedResult> {
  const child = fork(fileURLToPath(import.meta.url), [], { execArgv: ["--import", "tsx"], env: { ...process.env, PACED_CLIENT: JSON.stringify(load) } });
  return new Promise((resolve, reject) => {
    child.once("message", (result: PacedResult) => resolve(result));
    child.once("error", reject);
    child.once("exit", (code) => code !== 0 && reject(new Error(`the paced client exited with ${code}`)));
  });
}

function failureKind(error: unknown): string {
  if (error instanceof OpenAI.APIError && error.status !== undefined) return `${error.status} ${error.code ?? error.type ?? ""}`.trim();
  return error instanceof Error ? error.name : String(error);
}

/** The child's side: every request started on schedule, then the counts once all have ended. */
async function runPaced(load: PacedLoad): Promise<PacedResult> {
  // The SDK's default retries would send more than the rate asks; its timeout only has to outlast the gateway's own queue wait.
  const client = new OpenAI({ apiKey: load.apiKey, baseURL: load.baseUrl, maxRetries: 0, timeout: 120_000 });
  const total = Math.round(load.rate * load.seconds);
  const latencies: number[] = [];
  const failures: Record<string, number> = {};
  const one = async () => {
    const started = performance.now();
    try {
      const request = { model: load.model, messages: BENCH_MESSAGES, max_tokens: load.maxTokens };
      if (load.stream) for await (const chunk of await client.chat.completions.create({ ...request, stream: true })) void chunk;
      else await client.chat.completions.create(request);
      latencies.push(performance.now() - started);
    } catch (error) {
      const kind = failureKind(error);
      failures[kind] = (failures[kind] ?? 0) + 1;
    }
  };
  const requests: Promise<void>[] = [];
  let maxLagMs = 0;
  const start = performance.now();
  for (let i = 0; i < total; i++) {
    const wait = start + (i * 1000) / load.rate - performance.now();
    if (wait > 0) await sleep(wait);
    else maxLagMs = Math.max(maxLagMs, -wait);
    requests.push(one());
  }
  await Promise.all(requests);
  const answered = latencies.length > 0 ? latencies : [0];
  return { sent: total, succeeded: latencies.length, failed: total - latencies.length, failures, p50Ms: percentile(answered, 50), p99Ms: percentile(answered, 99), maxLagMs };
}

if (process.env.PACED_CLIENT && process.send) {
  const result = await runPaced(JSON.parse(process.env.PACED_CLIENT) as PacedLoad);
  // The SDK's kept-alive connections would hold the process open; nothing is left to do.
  process.send(result, () => process.exit(0));
}
