/**
 * What the gateway adds to requests whose upstream takes a while to its first token, as a real
 * model does while it reads the prompt: sequential requests straight to an upstream that waits
 * that long before it answers, and through the gateway (svc dev's defaults, SQLite on disk;
 * STORES=pglite for PGlite; PostgreSQL too when DATABASE_URL is set), alternated and sent from a child process (latency.ts).
 * The worker and the upstream run in another process, as they do in production
 * (worker-process.ts), so neither shares the gateway's thread or clock.
 * bench/load.ts measures the same against an upstream that answers at once, where nothing the
 * gateway does can overlap the upstream's own time.
 *
 *   npm run bench:first-token -- [upstream's time to first token, ms (20)] [requests of each kind (100)]
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startService } from "../src/service.ts";
import { latencyLine, measureLatency } from "./latency.ts";
import { benchStorage, embeddedStores, fundedClient, settled } from "./support.ts";
import { BENCH_MODEL as MODEL, startWorkerProcess, UPSTREAM_MODEL } from "./worker-process.ts";

const FIRST_TOKEN_MS = Number(process.argv[2] ?? 20);
const COUNT = Number(process.argv[3] ?? 100);

/** Both kinds of request straight to the upstream and through one gateway on `kind`'s storage. */
async function measure(kind: "sqlite" | "pglite" | "postgres", dir: string): Promise<string[]> {
  const storage = await benchStorage(kind, join(dir, kind));
  const service = await startService({ port: 0, ...storage.options, rateLimit: false });
  const worker = await startWorkerProcess({ gateway: service.origin, firstTokenMs: FIRST_TOKEN_MS }).catch(async (error: unknown) => {
    await service.close();
    throw error;
  });
  service.trust.vouch(worker.address);
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

const dir = await mkdtemp(join(tmpdir(), "svc-first-token-"));
const lines: string[] = [];
try {
  for (const kind of [...embeddedStores(), ...(process.env.DATABASE_URL ? (["postgres"] as const) : [])]) {
    lines.push(...(await measure(kind, dir)));
  }
} finally {
  await rm(dir, { recursive: true, force: true });
}
console.log(`upstream's time to first token ${FIRST_TOKEN_MS} ms; ${COUNT} sequential requests of each kind, ms, p50 / p99:`);
for (const line of lines) console.log(line);
