/**
 * The database work of one paid JSON completion: the statements and transactions it runs, by
 * statement, and the time spent awaiting them, measured over N sequential requests through the
 * gateway on svc dev's defaults (SQLite on disk; STORES=pglite for PGlite; PostgreSQL when
 * DATABASE_URL is set) with a
 * worker serving Qwen/Qwen3-1.7B through an instant upstream. Counts are per job, including the
 * settlement's confirmation, which finishes after the reply.
 *
 * With a concurrency above 1, that many requests run at once, and jobs arriving together share
 * their transactions (group commit): the counts show what that leaves per job. The wall time per
 * request is also printed for each tenth of the run: one that grows says a cost grows with the
 * tables (as plans made on empty tables do when nothing analyzes them).
 *
 * On an embedded database it also prints what each statement costs inside it: the time of its
 * synchronous run of each statement (PGlite: each exchange), which under concurrency the awaiting time overstates (it
 * includes the queue before the statement's turn).
 *
 * On PostgreSQL it also prints the write-ahead log's bytes per job by table or index and record
 * type, read with pg_walinspect (installed in the bench's own schema, which is dropped after; it
 * needs a superuser, as on this machine's PostgreSQL): which writes the log's volume comes from.
 *
 * With DATABASE_DELAY_MS as well, PostgreSQL is reached through a proxy holding each chunk that
 * long each way (bench/database-distance.ts): a database one network hop away, where each
 * statement's round trip is what a sequential request waits for.
 *
 * Run: node --import tsx bench/job-statements.ts [jobs=100] [concurrency=1]
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { generateKeypair } from "../src/core/keys.ts";
import { OpenAiEngine } from "../src/inference/openai-engine.ts";
import { startService } from "../src/service.ts";
import type { Db } from "../src/store/index.ts";
import { TxHandle } from "../src/store/tx.ts";
import { WorkerNode } from "../src/worker/worker-node.ts";
import { startUpstream } from "../test/support/upstream-server.ts";
import { benchStorage, embeddedStores, fundedClient, observePgliteExchanges, observeSqliteStatements } from "./support.ts";

const JOBS = Number(process.argv[2] ?? 100);
const CONCURRENCY = Number(process.argv[3] ?? 1);
const MODEL = "Qwen/Qwen3-1.7B";
const settle = () => new Promise((resolve) => setTimeout(resolve, 1500));
/** A statement's text on one line, as far as the tables show it. */
const shortText = (sql: string) => sql.replace(/\s+/g, " ").trim().slice(0, 80);

const embeddedTime = timeInsideEmbedded();
const upstream = await startUpstream("vllm", { model: "qwen3-1.7b", reply: ["Hello", " there", "."], contextWindow: 32_768, splitWrites: false });
const engine = await OpenAiEngine.connect({ baseUrl: upstream.baseUrl, model: "qwen3-1.7b" });
const dir = await mkdtemp(join(tmpdir(), "svc-statements-"));
const storage = await benchStorage(process.env.DATABASE_URL ? "postgres" : embeddedStores()[0]!, dir);
const service = await startService({
  port: 0,
  ...storage.options,
  seedWorkers: [new WorkerNode(generateKeypair(), new Map([[MODEL, engine]]), false)],
  rateLimit: false,
});
const client = await fundedClient(service, 10_000_000);
const ask = () => client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hello" }], max_tokens: 8 });
for (let i = 0; i < 20; i++) await ask();
await settle();

// Counted where every statement passes: the root Db's methods and the transaction handle's.
const counts = new Map<string, { n: number; ms: number }>();
let transactions = 0;
let counting = true;
function count(target: object, method: "query" | "exec", where: string): void {
  const original = (target as Record<string, (...args: unknown[]) => Promise<unknown>>)[method]!;
  Object.defineProperty(target, method, {
    value: async function (this: Db, sql: string, ...rest: unknown[]) {
      const started = performance.now();
      try {
        return await original.call(this, sql, ...rest);
      } finally {
        if (counting) {
          const key = `${where} ${shortText(sql)}`;
          const c = counts.get(key) ?? { n: 0, ms: 0 };
          counts.set(key, { n: c.n + 1, ms: c.ms + performance.now() - started });
        }
      }
    },
  });
}
const root = Object.getPrototypeOf(service.db) as Db;
count(TxHandle.prototype, "query", "tx");
count(TxHandle.prototype, "exec", "tx");
count(root, "query", "db");
count(root, "exec", "db");
const transaction = root.transaction;
Object.defineProperty(root, "transaction", {
  value: function (this: Db, fn: (tx: Db) => Promise<unknown>) {
    if (counting) transactions++;
    return transaction.call(this, fn);
  },
});

// A transaction inside a transaction is a savepoint: two more exchanges (SAVEPOINT, RELEASE).
let savepoints = 0;
const nested = TxHandle.prototype.transaction;
Object.defineProperty(TxHandle.prototype, "transaction", {
  value: function (this: Db, fn: (tx: Db) => Promise<unknown>) {
    if (counting) savepoints++;
    return nested.call(this, fn);
  },
});

/**
 * The log's records between two positions, summed by the table or index each changed (or, for a
 * record of no relation, its resource manager) and record type: bytes per job, of them full-page
 * images, and records per job. The relation is read from the record's first block reference.
 */
async function walByRelation(from: string, to: string): Promise<string[]> {
  try {
    await service.db.exec("CREATE EXTENSION IF NOT EXISTS pg_walinspect");
    const rows = await service.db.query<{ relation: string; kind: string; bytes: string; images: string; records: string }>(
      `SELECT coalesce(c.relname, r.resource_manager) AS relation, r.record_type AS kind, sum(r.record_length)::text AS bytes,
              sum(r.fpi_length)::text AS images, count(*)::text AS records
         FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) r
         LEFT JOIN pg_class c ON c.relfilenode = substring(r.block_ref FROM 'rel [0-9]+/[0-9]+/([0-9]+)')::oid
        GROUP BY 1, 2 ORDER BY sum(r.record_length + r.fpi_length) DESC LIMIT 20`,
      [from, to],
    );
    const perJob = (n: string, digits: number) => (Number(n) / JOBS).toFixed(digits);
    return [
      "write-ahead log per job, by table or index:  bytes  (full-page images)  records",
      ...rows.map((r) => `${perJob(r.bytes, 0).padStart(7)} ${`(${perJob(r.images, 0)})`.padStart(7)} ${perJob(r.records, 2).padStart(6)}  ${r.relation} ${r.kind}`),
    ];
  } catch (error) {
    return [`write-ahead log by table: not read (${error instanceof Error ? error.message : String(error)})`];
  }
}

/** Where the database's write-ahead log stands: its growth is what the jobs made it write. */
const walPosition = async () => (await service.db.query<{ lsn: string }>("SELECT pg_current_wal_lsn()::text AS lsn"))[0]!.lsn;
/** PostgreSQL's log (PGlite's too); SQLite's is not read here. */
const readsLog = storage.kind !== "sqlite";
const walBefore = readsLog ? await walPosition() : "";
embeddedTime.counting = true;
const started = performance.now();
let asked = 0;
/** When each tenth of the jobs had been answered: a cost that grows with the tables shows as later tenths taking longer. */
const tenths: number[] = [];
let answered = 0;
await Promise.all(
  Array.from({ length: CONCURRENCY }, async () => {
    while (asked < JOBS) {
      asked++;
      await ask();
      if (++answered % Math.max(1, Math.floor(JOBS / 10)) === 0) tenths.push(performance.now());
    }
  }),
);
const wallMs = performance.now() - started;
await settle();
counting = false;
embeddedTime.counting = false;
const [wal] = readsLog ? await service.db.query<{ bytes: string }>("SELECT pg_wal_lsn_diff($1::pg_lsn, $2::pg_lsn)::text AS bytes", [await walPosition(), walBefore]) : [];

console.log(`${JOBS} jobs, ${CONCURRENCY} at a time; storage: ${storage.label}`);
console.log("per job  ms/job  statement");
let statements = 0;
let awaitedMs = 0;
for (const [key, c] of [...counts].sort((a, b) => b[1].n - a[1].n)) {
  statements += c.n;
  awaitedMs += c.ms;
  if (c.n >= JOBS / 20) console.log(`${(c.n / JOBS).toFixed(2).padStart(7)} ${(c.ms / JOBS).toFixed(2).padStart(7)}  ${key}`);
}
console.log(
  `per job: ${(statements / JOBS).toFixed(1)} statements, ${(transactions / JOBS).toFixed(1)} transactions, ` +
    `${(savepoints / JOBS).toFixed(1)} savepoints, ` +
    `${(awaitedMs / JOBS).toFixed(1)} ms awaiting them; ${(wallMs / JOBS).toFixed(1)} ms of wall time per request`,
);
if (wal) console.log(`write-ahead log: ${(Number(wal.bytes) / JOBS / 1024).toFixed(1)} KB per job`);
if (storage.kind === "postgres") for (const line of await walByRelation(walBefore, await walPosition())) console.log(line);
if (storage.kind !== "postgres") embeddedTime.report(JOBS, storage.kind === "sqlite" ? "SQLite" : "PGlite");
if (JOBS >= 100) {
  const perTenth = tenths.slice(0, 10).map((at, i) => (at - (i === 0 ? started : tenths[i - 1]!)) / Math.floor(JOBS / 10));
  console.log(`ms of wall time per request, by tenth of the run: ${perTenth.map((ms) => ms.toFixed(1)).join(" ")}`);
}
await service.close();
await storage.drop();
await engine.close();
await upstream.close();
await rm(dir, { recursive: true, force: true });
process.exit(0);

/**
 * What each statement of the embedded database cost the thread: SQLite's statements
 * (observeSqliteStatements), by their text; PGlite's exchanges (observePgliteExchanges), by their
 * first message: a simple query by its text, a prepared statement's run (Bind) by the text its
 * Parse carried, a Parse by "prepare".
 */
function timeInsideEmbedded(): { counting: boolean; report(jobs: number, engine: string): void } {
  const texts = new Map<string, string>();
  const costs = new Map<string, { n: number; ms: number }>();
  const state = { counting: false, report };
  const add = (name: string, ms: number) => {
    const key = shortText(name);
    const c = costs.get(key) ?? { n: 0, ms: 0 };
    costs.set(key, { n: c.n + 1, ms: c.ms + ms });
  };
  const cString = (bytes: Uint8Array, at: number): [string, number] => {
    const end = bytes.indexOf(0, at);
    return [Buffer.from(bytes.subarray(at, end)).toString(), end + 1];
  };
  const nameOf = (message: Uint8Array): string => {
    const type = String.fromCharCode(message[0]!);
    if (type === "Q") return cString(message, 5)[0];
    if (type === "B") return texts.get(cString(message, cString(message, 5)[1])[0]) ?? "(a statement prepared before the count)";
    if (type === "P") {
      const [name, at] = cString(message, 5);
      texts.set(name, cString(message, at)[0]);
      return "prepare";
    }
    return `protocol message ${type}`;
  };
  observePgliteExchanges((message, ms) => {
    // Named even when not counting: a Parse names the statement its later runs (Binds) execute.
    const name = nameOf(message);
    if (state.counting) add(name, ms);
  });
  observeSqliteStatements((sql, ms) => {
    if (state.counting) add(sql, ms);
  });
  function report(jobs: number, engine: string): void {
    console.log(`inside ${engine}, per job: ms  runs  statement`);
    let ms = 0;
    for (const [key, c] of [...costs].sort((a, b) => b[1].ms - a[1].ms)) {
      ms += c.ms;
      if (c.ms / jobs >= 0.02) console.log(`${(c.ms / jobs).toFixed(3).padStart(9)} ${(c.n / jobs).toFixed(2).padStart(5)}  ${key}`);
    }
    console.log(`inside ${engine}: ${(ms / jobs).toFixed(2)} ms per job`);
  }
  return state;
}
