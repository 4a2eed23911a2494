/**
 * What an ANALYZE costs the embedded database, and what it buys. PGlite runs on the gateway's
 * main thread, so each ANALYZE the node runs for itself (src/store/auto-vacuum.ts) holds every
 * request for its length. The bench grows a node's tables with paid JSON completions (svc dev's
 * defaults, PGlite on disk; a worker and an instant upstream in a process of their own), then:
 *
 * - times an ANALYZE of each busy table at statistics targets 100, 10 and 1, twice over, in turn;
 * - after analyzing every table at each target, asks PostgreSQL for the generic plan of every
 *   statement the node has prepared (EXPLAIN (GENERIC_PLAN)) and counts the plans that differ
 *   from the first target's, and those that scan a busy table whole.
 *
 *   npm run bench:analyze -- [seconds of load at 32 connections (30)]
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import autocannon from "autocannon";
import { startService } from "../src/service.ts";
import type { Db } from "../src/store/index.ts";
import { benchStorage, fundedClient, settled } from "./support.ts";
import { BENCH_MODEL as MODEL, startWorkerProcess } from "./worker-process.ts";

const SECONDS = Number(process.argv[2] ?? 30);
const TARGETS = [100, 10, 1];
const BUSY_TABLES = ["chain_actions", "events", "jobs", "ledger_transfers"];

async function analyzeMs(db: Db, table: string): Promise<number> {
  const started = performance.now();
  await db.exec(`ANALYZE public.${table}`);
  return performance.now() - started;
}

/** Each busy table's ANALYZE at each target, in ms. */
async function timeAnalyses(db: Db): Promise<void> {
  console.log(`ms to ANALYZE     ${BUSY_TABLES.map((t) => t.padStart(16)).join(" ")}     all`);
  for (const round of [1, 2]) {
    for (const target of TARGETS) {
      await db.exec(`SET default_statistics_target = ${target}`);
      const times: number[] = [];
      for (const table of BUSY_TABLES) times.push(await analyzeMs(db, table));
      const all = times.reduce((a, b) => a + b, 0);
      console.log(`target ${String(target).padStart(3)}, round ${round} ${times.map((ms) => ms.toFixed(1).padStart(16)).join(" ")} ${all.toFixed(1).padStart(7)}`);
    }
  }
}

const oneLine = (text: string) => text.replace(/\s+/g, " ").trim().slice(0, 400);

/** The generic plan of every prepared statement after analyzing all tables at each target. */
async function comparePlans(db: Db): Promise<void> {
  const statements = (await db.query<{ statement: string }>("SELECT statement FROM pg_prepared_statements ORDER BY name"))
    .map((row) => row.statement)
    .filter((sql) => /^\s*(WITH|SELECT|UPDATE|INSERT|DELETE)/i.test(sql));
  const wholeScan = new RegExp(`Seq Scan on (${BUSY_TABLES.join("|")})\\b`);
  // Through a function: the store prepares every text it runs, and a prepared EXPLAIN of a text
  // with parameters would need their values.
  await db.exec(`CREATE FUNCTION pg_temp.generic_plan(statement text) RETURNS SETOF text LANGUAGE plpgsql AS $$
    BEGIN RETURN QUERY EXECUTE 'EXPLAIN (GENERIC_PLAN, COSTS OFF) ' || statement; END $$`);
  let first: string[] | undefined;
  for (const target of TARGETS) {
    await db.exec(`SET default_statistics_target = ${target}`);
    await db.exec("ANALYZE");
    const plans: string[] = [];
    for (const sql of statements) {
      const rows = await db.query<{ line: string }>("SELECT pg_temp.generic_plan($1) AS line", [sql]);
      plans.push(rows.map((row) => row.line).join("\n"));
    }
    first ??= plans;
    const differ = plans.filter((plan, i) => plan !== first![i]).length;
    const scans = statements.filter((_, i) => wholeScan.test(plans[i]!));
    console.log(`target ${String(target).padStart(3)}: ${statements.length} statements, ${differ} plans differ from target ${TARGETS[0]}'s, ${scans.length} scan a busy table whole`);
    for (const sql of scans) console.log(`  scans: ${oneLine(sql)}`);
    plans.forEach((plan, i) => plan !== first![i] && console.log(`  differs: ${oneLine(statements[i]!)}\n    was: ${oneLine(first![i]!)}\n    now: ${oneLine(plan)}`));
  }
}

const dir = await mkdtemp(join(tmpdir(), "svc-analyze-"));
const storage = await benchStorage("pglite", join(dir, "pglite"));
const service = await startService({ port: 0, ...storage.options, rateLimit: false });
const worker = await startWorkerProcess({ gateway: service.origin });
service.trust.vouch(worker.address);
try {
  const client = await fundedClient(service, 100_000_000);
  const body = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hello" }], max_tokens: 8 });
  const headers = { "content-type": "application/json", authorization: `Bearer ${client.apiKey}` };
  const load = await autocannon({ url: `${service.baseUrl}/chat/completions`, method: "POST", body, headers, connections: 32, duration: SECONDS });
  await settled(service);
  const sizes = await service.db.query<{ relname: string; rows: bigint }>(
    `SELECT relname, n_live_tup AS rows FROM pg_stat_user_tables WHERE relname = ANY($1) ORDER BY relname`,
    [BUSY_TABLES],
  );
  console.log(`${load.requests.total} requests over ${SECONDS} s; rows: ${sizes.map((s) => `${s.relname} ${s.rows}`).join(", ")}`);
  await timeAnalyses(service.db);
  await comparePlans(service.db);
} finally {
  worker.close();
  await service.close();
  await rm(dir, { recursive: true, force: true });
}
process.exit(0);
