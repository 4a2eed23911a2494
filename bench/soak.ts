/**
 * A node under steady load for minutes: whether its throughput, latency and pauses hold as its
 * tables grow. `bench/load.ts` measures a few seconds at each concurrency, on tables of a few
 * thousand jobs; a node in service runs for days, and some of its costs grow with what it has
 * stored (the upkeep its embedded database does on the main thread, src/store/auto-vacuum.ts).
 *
 * It starts the service (svc dev's defaults, PGlite on disk; PostgreSQL instead when DATABASE_URL
 * is set), a worker and an instant upstream in a process of their own (as bench/load.ts does), and
 * drives paid JSON completions at 32 connections without a pause for the whole run. Every window
 * it prints what the node answered in it: requests a second, latency p50 / p99 / max, failures,
 * the main thread's longest stall, each VACUUM, ANALYZE and CHECKPOINT the node ran on itself (from
 * its call to its end, its wait behind the requests' statements included), the process's RSS and
 * its main thread's JavaScript heap, the jobs stored and the data dir's size on disk. After the
 * load it prints how long the backlog took to settle, and where the data dir's bytes are.
 *
 * Run: npm run bench:soak -- [minutes (10)] [seconds a window (30)]
 */
import { execFileSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { monitorEventLoopDelay } from "node:perf_hooks";
import autocannon from "autocannon";
import { startService } from "../src/service.ts";
import type { Db } from "../src/store/index.ts";
import { benchStorage, fundedClient, percentile, settled } from "./support.ts";
import { BENCH_MODEL as MODEL, startWorkerProcess } from "./worker-process.ts";

const MINUTES = Number(process.argv[2] ?? 10);
const WINDOW_SECONDS = Number(process.argv[3] ?? 30);
const CONNECTIONS = 32;
/** How often the stall monitor samples; Node counts this period into each delay it reports. */
const STALL_RESOLUTION_MS = 10;

/** The node's own VACUUMs, ANALYZEs and CHECKPOINTs, timed: it runs them through `db.exec` (auto-vacuum.ts). */
function timeMaintenance(db: Db, into: string[]): void {
  const exec = db.exec.bind(db);
  db.exec = async (sql: string) => {
    const match = /^(VACUUM|ANALYZE|CHECKPOINT)\b(?:.*?([\w."]+))?$/s.exec(sql.trim());
    if (!match) return exec(sql);
    const started = performance.now();
    try {
      return await exec(sql);
    } finally {
      const table = match[2] ? ` ${match[2].replace(/^public\.|"/g, "")}` : "";
      into.push(`${match[1]}${table} ${(performance.now() - started).toFixed(0)} ms`);
    }
  };
}

async function jobsStored(db: Db): Promise<number> {
  const [row] = await db.query<{ n: number }>("SELECT n_live_tup::int AS n FROM pg_stat_user_tables WHERE relname = 'jobs' AND schemaname = ANY (current_schemas(false))");
  return row?.n ?? 0;
}

/** Each busy table's rows, its updates and the share of them that were HOT (no new index entries), and its size. */
async function tableUpdates(db: Db): Promise<string> {
  const rows = await db.query<{ name: string; live: number; updates: number; hot: number; table_mb: number; indexes_mb: number }>(
    `SELECT relname AS name, n_live_tup::int AS live, n_tup_upd::int AS updates, n_tup_hot_upd::int AS hot,
            (pg_table_size(relid) / 1e6)::float8 AS table_mb, (pg_indexes_size(relid) / 1e6)::float8 AS indexes_mb
       FROM pg_stat_user_tables WHERE schemaname = ANY (current_schemas(false)) AND n_tup_ins > 1000 ORDER BY relname`,
  );
  for (const r of rows) {
    const [counted] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${r.name}`);
    r.live = counted!.n;
  }
  const lines = rows.map((r) =>
    [r.name.padEnd(20), String(r.live).padStart(9), String(r.updates).padStart(9), `${((100 * r.hot) / Math.max(r.updates, 1)).toFixed(0)}%`.padStart(6), r.table_mb.toFixed(0).padStart(9), r.indexes_mb.toFixed(0).padStart(10)].join(" "),
  );
  return ["table                     rows   updates    HOT  table MB  indexes MB", ...lines].join("\n");
}

const diskMb = (dir: string) => Number(execFileSync("du", ["-sk", dir]).toString().split("\t")[0]) / 1024;

/** Where the data dir's bytes are: its folders two levels down holding at least 1 MB. */
function diskBreakdown(dir: string): string {
  return execFileSync("du", ["-k", "-d", "2", dir])
    .toString()
    .trim()
    .split("\n")
    .map((line) => line.split("\t") as [string, string])
    .filter(([kib]) => Number(kib) >= 1024)
    .map(([kib, path]) => `${(Number(kib) / 1024).toFixed(0).padStart(8)} MB  ${path.slice(dir.length) || "/"}`)
    .join("\n");
}

const dir = await mkdtemp(join(tmpdir(), "svc-soak-"));
const storage = await benchStorage(process.env.DATABASE_URL ? "postgres" : "pglite", join(dir, "data"));
const service = await startService({ port: 0, ...storage.options, rateLimit: false });
const worker = await startWorkerProcess({ gateway: service.origin });
service.trust.vouch(worker.address);
const maintenance: string[] = [];
timeMaintenance(service.db, maintenance);
try {
  const client = await fundedClient(service, 1_000_000_000);
  const body = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hello" }], max_tokens: 8 });
  const headers = { "content-type": "application/json", authorization: `Bearer ${client.apiKey}` };
  console.log(`${storage.label}, ${CONNECTIONS} connections for ${MINUTES} min, load average ${loadavg()[0]!.toFixed(2)} before`);
  console.log("    s   req/s   p50 ms   p99 ms   max ms  failed  stall ms   RSS MB  heap MB     jobs  disk MB  upkeep on the node's database in the window");
  const stalls = monitorEventLoopDelay({ resolution: STALL_RESOLUTION_MS });
  stalls.enable();
  let latencies: number[] = [];
  let failed = 0;
  const started = performance.now();
  const options = { url: `${service.baseUrl}/chat/completions`, method: "POST" as const, body, headers, connections: CONNECTIONS, duration: MINUTES * 60 };
  const result = new Promise<autocannon.Result>((resolve, reject) => {
    const run = autocannon(options, (error, done) => (error ? reject(error) : resolve(done)));
    run.on("response", (_client, status, _bytes, ms) => {
      if (status === 200) latencies.push(ms);
      else failed++;
    });
    run.on("reqError", () => failed++);
  });
  const report = setInterval(async () => {
    const window = latencies;
    const windowFailed = failed;
    const stallMs = stalls.max / 1e6 - STALL_RESOLUTION_MS;
    const upkeep = maintenance.splice(0).join("; ");
    [latencies, failed] = [[], 0];
    stalls.reset();
    const line = [
      ((performance.now() - started) / 1000).toFixed(0).padStart(5),
      (window.length / WINDOW_SECONDS).toFixed(0).padStart(7),
      percentile(window, 50).toFixed(0).padStart(8),
      percentile(window, 99).toFixed(0).padStart(8),
      Math.max(...window).toFixed(0).padStart(8),
      String(windowFailed).padStart(7),
      stallMs.toFixed(0).padStart(9),
      (process.memoryUsage.rss() / 1e6).toFixed(0).padStart(8),
      (process.memoryUsage().heapUsed / 1e6).toFixed(0).padStart(8),
      String(await jobsStored(service.db)).padStart(8),
      diskMb(dir).toFixed(0).padStart(8),
    ];
    console.log(`${line.join(" ")}  ${upkeep}`);
  }, WINDOW_SECONDS * 1000);
  const done = await result;
  clearInterval(report);
  console.log(`${done.requests.total} requests, ${done.non2xx} non-2xx, ${done.errors} errors, ${done.timeouts} timeouts`);
  console.log(`backlog settled in ${(await settled(service)).toFixed(0)} ms after the load stopped`);
  console.log(await tableUpdates(service.db));
  console.log(`the data dir:\n${diskBreakdown(storage.options.dataDir)}`);
} finally {
  worker.close();
  await service.close();
  await storage.drop();
  await rm(dir, { recursive: true, force: true });
}
process.exit(0);
