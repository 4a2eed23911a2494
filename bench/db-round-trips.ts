/**
 * The database work of one paid, non-streaming chat completion through the gateway: statements
 * sent (`db.query`), transactions opened (and savepoints inside them), balance reads (reads of a
 * wallet's ledger account row) and reads of the job's row. The service runs on an in-memory
 * PGlite wrapped in a counter; webhook delivery is stopped so that only the request's own work
 * (auth, admission, escrow, settlement, events, and the background confirmations the reply waits
 * for) is counted. The figures are exact counts, the same on every run.
 *
 *   node --import tsx bench/db-round-trips.ts [requests=5]
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { WIRING_MODEL_ID } from "../src/catalog/catalog.ts";
import { generateKeypair } from "../src/core/keys.ts";
import { LlamaEngine } from "../src/inference/llama-engine.ts";
import { ensureWiringModel } from "../src/inference/wiring-model.ts";
import { startService } from "../src/service.ts";
import { openDb, type Db } from "../src/store/index.ts";
import { WorkerNode } from "../src/worker/worker-node.ts";
import { BENCH_MAX_TOKENS, BENCH_MESSAGES, fundedClient } from "./support.ts";

const requests = Number(process.argv[2] ?? 5);

interface Counts {
  queries: number;
  transactions: number;
  savepoints: number;
  balanceReads: number;
  jobReads: number;
  /** Statements by the table they name first, to see where the work goes. */
  byTable: Map<string, number>;
}

const fresh = (): Counts => ({ queries: 0, transactions: 0, savepoints: 0, balanceReads: 0, jobReads: 0, byTable: new Map() });
let counts = fresh();
let lastQueryAt = Date.now();

function tally(sql: string, params: unknown[] | undefined): void {
  counts.queries++;
  lastQueryAt = Date.now();
  const flat = sql.replace(/\s+/g, " ").trim();
  if (/^SELECT .* FROM ledger_accounts WHERE id = \$1$/.test(flat) && String(params?.[0]).startsWith("wallet:")) counts.balanceReads++;
  if (/^SELECT .* FROM jobs WHERE id = \$1$/.test(flat)) counts.jobReads++;
  const table = /\b(?:FROM|INTO|UPDATE)\s+([a-z_]+)/i.exec(flat)?.[1] ?? flat.split(" ")[0]!;
  counts.byTable.set(table, (counts.byTable.get(table) ?? 0) + 1);
}

/** The same handle, counting what goes through it; a transaction's handle counts too. */
function counting(db: Db, nested: boolean): Db {
  return {
    kind: db.kind,
    query: (sql, params) => {
      tally(sql, params);
      return db.query(sql, params);
    },
    exec: (sql) => {
      tally(sql, undefined);
      return db.exec(sql);
    },
    transaction: (fn) => {
      if (nested) counts.savepoints++;
      else counts.transactions++;
      lastQueryAt = Date.now();
      return db.transaction((tx) => fn(counting(tx, true)));
    },
    close: () => db.close(),
  };
}

/** Wait until the service has sent no statement for a while: the request's background work is done. */
async function quiet(ms = 300): Promise<void> {
  while (Date.now() - lastQueryAt < ms) await new Promise((resolve) => setTimeout(resolve, 50));
}

const scratch = await mkdtemp(join(tmpdir(), "svc-bench-round-trips-"));
const engine = await LlamaEngine.load({ modelPath: await ensureWiringModel(scratch), threads: 1 });
const service = await startService({
  port: 0,
  db: counting(await openDb(), false),
  seedWorkers: [new WorkerNode(generateKeypair(), new Map([[WIRING_MODEL_ID, engine]]))],
  rateLimit: { ratePerSecond: 1e6, burst: 1e6 },
});
await service.delivery.stop();
const client = await fundedClient(service, 1000);
const complete = () => client.chat.completions.create({ model: WIRING_MODEL_ID, messages: BENCH_MESSAGES, max_tokens: BENCH_MAX_TOKENS, temperature: 0 });

// The first request warms caches (the API key, the vocabulary); it is not counted.
await complete();
await quiet();

const runs: Counts[] = [];
for (let i = 0; i < requests; i++) {
  counts = fresh();
  await complete();
  await quiet();
  runs.push(counts);
}
await service.close();
await engine.close();
await rm(scratch, { recursive: true, force: true });

const last = runs[runs.length - 1]!;
const same = runs.every((r) => r.queries === last.queries && r.transactions === last.transactions && r.balanceReads === last.balanceReads);
console.log(`one paid non-streaming chat completion (${requests} measured${same ? ", all alike" : ", they differ: see below"}):`);
console.log(`  db.query calls   ${last.queries}`);
console.log(`  transactions     ${last.transactions} (+ ${last.savepoints} savepoints inside them)`);
console.log(`  balance reads    ${last.balanceReads}`);
console.log(`  job row reads    ${last.jobReads}`);
console.log(`  statements by table: ${[...last.byTable].sort((a, b) => b[1] - a[1]).map(([t, n]) => `${t} ${n}`).join(", ")}`);
if (!same) for (const r of runs) console.log(`  run: ${r.queries} queries, ${r.transactions} transactions, ${r.balanceReads} balance reads`);
