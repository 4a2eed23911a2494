/**
 * What the gateway adds to requests whose upstream takes a while to its first token, as a real
 * model does while it reads the prompt: sequential requests straight to an upstream that waits
 * that long before it answers, and through the gateway (svc dev's defaults, PGlite on disk; and
 * PostgreSQL when DATABASE_URL is set), alternated and sent from a child process (latency.ts).
 * The worker and the upstream run in another process, as they do in production: the worker a
 * WorkerClient over the worker protocol, so neither shares the gateway's thread or clock.
 * bench/load.ts measures the same against an upstream that answers at once, where nothing the
 * gateway does can overlap the upstream's own time.
 *
 *   npm run bench:first-token -- [upstream's time to first token, ms (20)] [requests of each kind (100)]
 */
import { fork } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { generateKeypair } from "../src/core/keys.ts";
import { OpenAiEngine } from "../src/inference/openai-engine.ts";
import { startService } from "../src/service.ts";
import { WorkerClient } from "../src/worker/worker-client.ts";
import { startUpstream } from "../test/support/upstream-server.ts";
import { latencyLine, measureLatency } from "./latency.ts";
import { benchStorage, fundedClient, settled } from "./support.ts";

const FIRST_TOKEN_MS = Number(process.argv[2] ?? 20);
const COUNT = Number(process.argv[3] ?? 100);
const MODEL = "Qwen/Qwen3-1.7B";
const UPSTREAM_MODEL = "qwen3-1.7b";

/** The child's side: the upstream and a worker serving it, connected to `gateway`; tells the parent once registered. */
async function serveWorker(firstTokenMs: number, gateway: string): Promise<void> {
  const upstream = await startUpstream("vllm", {
    model: UPSTREAM_MODEL,
    reply: ["Hello", " there", "."],
    contextWindow: 32_768,
    splitWrites: false,
    firstTokenDelayMs: firstTokenMs,
  });
  const engine = await OpenAiEngine.connect({ baseUrl: upstream.baseUrl, model: UPSTREAM_MODEL });
  const worker = new WorkerClient({ gateway, signer: generateKeypair(), engines: new Map([[MODEL, engine]]), concurrency: 8 }).start();
  await worker.registered();
  process.send!(upstream.baseUrl);
  process.once("disconnect", () => void worker.close().then(() => upstream.close()));
}

function startWorkerProcess(gateway: string): Promise<{ upstreamUrl: string; close(): void }> {
  const env = { ...process.env, FIRST_TOKEN_WORKER: JSON.stringify({ firstTokenMs: FIRST_TOKEN_MS, gateway }) };
  const child = fork(fileURLToPath(import.meta.url), [], { execArgv: ["--import", "tsx"], env });
  return new Promise((resolve, reject) => {
    child.once("message", (upstreamUrl) => resolve({ upstreamUrl: upstreamUrl as string, close: () => child.disconnect() }));
    child.once("exit", (code) => reject(new Error(`the worker's process exited with ${code}`)));
  });
}

/** Both kinds of request straight to the upstream and through one gateway on `kind`'s storage. */
async function measure(kind: "pglite" | "postgres", dir: string): Promise<string[]> {
  const storage = await benchStorage(kind, join(dir, kind));
  const service = await startService({ port: 0, ...storage.options, rateLimit: false });
  const worker = await startWorkerProcess(service.origin).catch(async (error: unknown) => {
    await service.close();
    throw error;
  });
  try {
    const client = await fundedClient(service, 1_000_000);
    const [direct, through] = await measureLatency(
      { url: `${worker.upstreamUrl}/chat/completions`, headers: {}, model: UPSTREAM_MODEL },
      { url: `${service.baseUrl}/chat/completions`, headers: { authorization: `Bearer ${client.apiKey}` }, model: MODEL, idle: () => settled(service) },
      COUNT,
    );
    return [
      latencyLine(`JSON request, ${storage.label}`, direct.jsonMs, through.jsonMs),
      latencyLine(`first token, ${storage.label}`, direct.firstTokenMs, through.firstTokenMs),
    ];
  } finally {
    worker.close();
    await service.close();
    await storage.drop();
  }
}

if (process.env.FIRST_TOKEN_WORKER && process.send) {
  const { firstTokenMs, gateway } = JSON.parse(process.env.FIRST_TOKEN_WORKER) as { firstTokenMs: number; gateway: string };
  await serveWorker(firstTokenMs, gateway);
} else {
  const dir = await mkdtemp(join(tmpdir(), "svc-first-token-"));
  const lines: string[] = [];
  try {
    for (const kind of process.env.DATABASE_URL ? (["pglite", "postgres"] as const) : (["pglite"] as const)) {
      lines.push(...(await measure(kind, dir)));
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  console.log(`upstream's time to first token ${FIRST_TOKEN_MS} ms; ${COUNT} sequential requests of each kind, ms, p50 / p99:`);
  for (const line of lines) console.log(line);
}
