/**
 * The benches' worker side in a process of its own, as in production: the test upstream (in
 * vLLM's dialect), the plain hop forwarding to it (hop.ts) and, when given a gateway, a
 * WorkerClient serving it over the worker protocol. None shares the gateway's thread, clock or
 * CPU time; the process reports its own CPU time.
 */
import { fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import { generateKeypair } from "../src/core/keys.ts";
import { OpenAiEngine } from "../src/inference/openai-engine.ts";
import { WorkerClient } from "../src/worker/worker-client.ts";
import { startUpstream } from "../test/support/upstream-server.ts";
import { serveHop } from "./hop.ts";
import { startProfile } from "./profile.ts";

/** The catalog's model the worker serves, and the upstream's own name for it. */
export const BENCH_MODEL = "Qwen/Qwen3-1.7B";
export const UPSTREAM_MODEL = "qwen3-1.7b";

export interface WorkerProcessOptions {
  /** A gateway's origin for the worker to join; without one, only the upstream runs. */
  gateway?: string;
  /** The upstream's wait before its first token (default 0: it answers at once). */
  firstTokenMs?: number;
  /** Jobs the worker declares it runs at once (default 1,024: more than any bench sends). */
  concurrency?: number;
}

export interface WorkerProcess {
  upstreamUrl: string;
  /** The plain hop beside the worker (hop.ts): the same process and upstream, forwarding alone. */
  hopUrl: string;
  /** The worker's address (empty without a gateway): the bench's gateway vouches for it, as an operator would for its own. */
  address: string;
  /** The process's CPU time so far (user and system), in ms. */
  cpuMs(): Promise<number>;
  /** A CPU profile of the process's main thread from now, written to `path` when saved. */
  startProfile(): Promise<{ save(path: string): Promise<void> }>;
  close(): void;
}

type FromChild = { type: "ready"; upstreamUrl: string; hopUrl: string; address: string } | { type: "cpu"; ms: number } | { type: "profiling" } | { type: "profile-saved" };
type ToChild = { type: "cpu" } | { type: "profile-start" } | { type: "profile-save"; path: string };

export function startWorkerProcess(options: WorkerProcessOptions = {}): Promise<WorkerProcess> {
  const child = fork(fileURLToPath(import.meta.url), [], { execArgv: ["--import", "tsx"], env: { ...process.env, BENCH_WORKER_PROCESS: JSON.stringify(options) } });
  /** Sends `message` and resolves with the child's first answer of type `answer`. */
  const ask = <T extends FromChild["type"]>(message: ToChild, answer: T) =>
    new Promise<Extract<FromChild, { type: T }>>((resolve) => {
      const onMessage = (reply: FromChild) => {
        if (reply.type !== answer) return;
        child.off("message", onMessage);
        resolve(reply as Extract<FromChild, { type: T }>);
      };
      child.on("message", onMessage);
      child.send(message);
    });
  const cpuMs = async () => (await ask({ type: "cpu" }, "cpu")).ms;
  const profile = async () => {
    await ask({ type: "profile-start" }, "profiling");
    return { save: async (path: string) => void (await ask({ type: "profile-save", path }, "profile-saved")) };
  };
  return new Promise((resolve, reject) => {
    child.once("message", (message: FromChild) => {
      if (message.type === "ready") resolve({ upstreamUrl: message.upstreamUrl, hopUrl: message.hopUrl, address: message.address, cpuMs, startProfile: profile, close: () => child.disconnect() });
    });
    child.once("exit", (code) => reject(new Error(`the bench's worker process exited with ${code}`)));
  });
}

async function serve(options: WorkerProcessOptions): Promise<void> {
  const upstream = await startUpstream("vllm", {
    model: UPSTREAM_MODEL,
    reply: ["Hello", " there", "."],
    contextWindow: 32_768,
    splitWrites: false,
    firstTokenDelayMs: options.firstTokenMs ?? 0,
  });
  const hop = await serveHop(upstream.baseUrl);
  let worker: WorkerClient | undefined;
  if (options.gateway !== undefined) {
    const engine = await OpenAiEngine.connect({ baseUrl: upstream.baseUrl, model: UPSTREAM_MODEL });
    worker = new WorkerClient({ gateway: options.gateway, signer: generateKeypair(), engines: new Map([[BENCH_MODEL, engine]]), concurrency: options.concurrency ?? 1024 }).start();
    await worker.registered();
  }
  const tell = (message: FromChild) => process.send!(message);
  let profiling: Awaited<ReturnType<typeof startProfile>> | undefined;
  process.on("message", async (message: ToChild) => {
    if (message.type === "profile-start") {
      profiling = await startProfile();
      return tell({ type: "profiling" });
    }
    if (message.type === "profile-save") {
      await profiling?.save(message.path);
      profiling = undefined;
      return tell({ type: "profile-saved" });
    }
    const usage = process.cpuUsage();
    tell({ type: "cpu", ms: (usage.user + usage.system) / 1000 });
  });
  process.once("disconnect", () => void (worker?.close() ?? Promise.resolve()).then(() => hop.close()).then(() => upstream.close()).then(() => process.exit(0)));
  tell({ type: "ready", upstreamUrl: upstream.baseUrl, hopUrl: hop.url, address: worker?.address ?? "" });
}

if (process.env.BENCH_WORKER_PROCESS && process.send) await serve(JSON.parse(process.env.BENCH_WORKER_PROCESS) as WorkerProcessOptions);
