/**
 * Sequential latency of one request straight to the upstream and through the gateway, alternated:
 * the whole JSON answer, and the first token of a stream (the first server-sent event carrying
 * text), each stream read to its end so the gateway settles it as a caller who stayed.
 *
 * The requests are sent and timed from a child process, a caller with its own event loop and CPU
 * time: the gateway answers before its settlement confirms, and a caller on the gateway's own
 * thread would read its answer only after the work that follows it. They follow each other back
 * to back unless a target asks to be waited for (`idle`).
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { percentile } from "./support.ts";

export interface Target {
  url: string;
  headers: Record<string, string>;
  model: string;
  /**
   * Resolves once the target has finished what a request left running (the gateway answers before
   * its settlement confirms); awaited, untimed, after each request, so each is timed on an idle
   * service. Called on the main thread. Without it requests follow each other back to back, as a
   * client sends them.
   */
  idle?: () => Promise<unknown>;
  /** False: only whole JSON requests are timed (a target whose streams fail). */
  streams?: boolean;
}

export interface Latencies {
  jsonMs: number[];
  firstTokenMs: number[];
}

const request = (target: Target, stream: boolean) => ({
  method: "POST",
  headers: { "content-type": "application/json", ...target.headers },
  body: JSON.stringify({ model: target.model, messages: [{ role: "user", content: "Hello" }], max_tokens: 8, stream }),
});

async function timeJson(target: Target): Promise<number> {
  const started = performance.now();
  const response = await fetch(target.url, request(target, false));
  await response.text();
  if (!response.ok) throw new Error(`${target.url} answered ${response.status}`);
  return performance.now() - started;
}

async function timeFirstToken(target: Target): Promise<number> {
  const started = performance.now();
  const response = await fetch(target.url, request(target, true));
  if (!response.ok || !response.body) throw new Error(`${target.url} answered ${response.status}`);
  const decoder = new TextDecoder();
  let seen = "";
  let firstMs: number | undefined;
  for await (const chunk of response.body) {
    if (firstMs !== undefined) continue;
    seen += decoder.decode(chunk, { stream: true });
    if (/"content":"[^"]/.test(seen)) firstMs = performance.now() - started;
  }
  if (firstMs === undefined) throw new Error(`${target.url} streamed no text`);
  return firstMs;
}

type FromClient = { type: "idle"; which: number } | { type: "done"; results: Latencies[] };

/** `count` requests of each kind to each target, after a few unmeasured ones, sent from a child process. */
export async function measureLatency(upstream: Target, gateway: Target, count = 100): Promise<[Latencies, Latencies]> {
  const [direct, through] = await measureLatencies([upstream, gateway], count);
  return [direct!, through!];
}

/** `measureLatency` for any number of targets, alternated request by request. */
export function measureLatencies(targets: readonly Target[], count = 100): Promise<Latencies[]> {
  const plain = targets.map(({ idle, ...target }) => ({ ...target, waits: idle !== undefined }));
  const client = fork(fileURLToPath(import.meta.url), [], {
    execArgv: ["--import", "tsx"],
    env: { ...process.env, LATENCY_CLIENT: JSON.stringify({ targets: plain, count }) },
  });
  return new Promise((resolve, reject) => {
    client.on("message", (message: FromClient) => {
      if (message.type === "idle") {
        Promise.resolve(targets[message.which]!.idle?.()).then(() => client.send("go"), reject);
        return;
      }
      resolve(message.results);
      client.disconnect();
    });
    client.on("error", reject);
    client.on("exit", (code) => code !== 0 && reject(new Error(`the latency client exited with ${code}`)));
  });
}

/** The child's side: the requests, each followed by a wait (untimed) for its target to be idle when it asks for one. */
async function runClient(targets: (Target & { waits: boolean })[], count: number): Promise<void> {
  const tell = (message: FromClient) => process.send!(message);
  const idle = (which: number) =>
    targets[which]!.waits
      ? new Promise<void>((resolve) => {
          process.once("message", () => resolve());
          tell({ type: "idle", which });
        })
      : Promise.resolve();
  const results: Latencies[] = targets.map(() => ({ jsonMs: [], firstTokenMs: [] }));
  for (let i = -5; i < count; i++) {
    for (const [which, target] of targets.entries()) {
      const json = await timeJson(target);
      await idle(which);
      const firstToken = target.streams === false ? undefined : await timeFirstToken(target);
      if (firstToken !== undefined) await idle(which);
      if (i < 0) continue;
      results[which]!.jsonMs.push(json);
      if (firstToken !== undefined) results[which]!.firstTokenMs.push(firstToken);
    }
  }
  tell({ type: "done", results });
}

if (process.env.LATENCY_CLIENT && process.send) {
  const { targets, count } = JSON.parse(process.env.LATENCY_CLIENT) as { targets: (Target & { waits: boolean })[]; count: number };
  await runClient(targets, count);
}

/** `p50 / p99` of each, and the gateway's addition. */
export function latencyLine(label: string, upstream: number[], gateway: number[]): string {
  const at = (values: number[], p: number) => percentile(values, p).toFixed(2);
  const added = (p: number) => (percentile(gateway, p) - percentile(upstream, p)).toFixed(2);
  return `${label.padEnd(40)} upstream ${at(upstream, 50)} / ${at(upstream, 99)}   gateway ${at(gateway, 50)} / ${at(gateway, 99)}   added ${added(50)} / ${added(99)}`;
}
