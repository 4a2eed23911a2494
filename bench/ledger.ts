/**
 * Ledger throughput: a job's money path, reserve then settle (post + worker and treasury payouts),
 * and reserve then a plain post, one job per operation; then the same settle path in groups of
 * 16 jobs per operation (reserveAll, resolveAll), as the job service's group commits make them,
 * with this process's CPU per job. Run: node --import tsx bench/ledger.ts [jobs]
 * PGlite and SQLite, in memory and on disk, always; PostgreSQL too when DATABASE_URL is set (in a
 * scratch schema).
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { splitPayout } from "../src/core/payout.ts";
import {
  ensureWalletAccounts,
  ensureWorkerAccount,
  FUNDING_ACCOUNT,
  LEDGER_MIGRATIONS,
  postPending,
  reserve,
  reserveAll,
  resolveAll,
  settle,
  transfer,
  TREASURY_ACCOUNT,
  walletAccountId,
  workerAccountId,
} from "../src/ledger/index.ts";
import { migrate, openDb, type Db } from "../src/store/index.ts";
import { openSqlite } from "../src/store/sqlite.ts";

const JOBS = Number(process.argv[2] ?? 400);
const WALLETS = 32;

interface Target {
  name: string;
  open(): Promise<{ db: Db; cleanup(): Promise<void> }>;
  concurrency: number[];
}

async function prepare(db: Db): Promise<string[]> {
  await migrate(db, LEDGER_MIGRATIONS);
  await ensureWorkerAccount(db, "bench-worker");
  const wallets: string[] = [];
  for (let i = 0; i < WALLETS; i++) {
    const address = `bench-${i}`;
    await ensureWalletAccounts(db, address);
    await transfer(db, { id: `bench-deposit-${i}`, debitAccountId: FUNDING_ACCOUNT, creditAccountId: walletAccountId(address), amount: 10n ** 15n, code: "deposit" });
    wallets.push(address);
  }
  return wallets;
}

type Step = (db: Db, wallet: string, job: string) => Promise<void>;

const reserveSettle: Step = async (db, wallet, job) => {
  await reserve(db, { id: `${job}:r`, wallet, amount: 500_000n, reference: job });
  const { worker, treasury } = splitPayout(37, false);
  await settle(db, {
    id: `${job}:s`,
    reservationId: `${job}:r`,
    charge: 370_000n,
    payouts: [
      { accountId: workerAccountId("bench-worker"), amount: worker, code: "worker_payout" },
      { accountId: TREASURY_ACCOUNT, amount: treasury, code: "protocol_fee" },
    ],
  });
};

const reservePost: Step = async (db, wallet, job) => {
  await reserve(db, { id: `${job}:r`, wallet, amount: 500_000n, reference: job });
  await postPending(db, { id: `${job}:p`, pendingId: `${job}:r`, amount: 370_000n });
};

/** Jobs per second with `concurrency` jobs in flight, each on its own wallet. */
async function measure(db: Db, wallets: string[], step: Step, concurrency: number): Promise<number> {
  const run = randomBytes(4).toString("hex");
  let next = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: concurrency }, async (_, lane) => {
      for (let job = next++; job < JOBS; job = next++) await step(db, wallets[lane % wallets.length]!, `${run}-${job}`);
    }),
  );
  return JOBS / ((performance.now() - started) / 1000);
}

const GROUP = 16;

/** Jobs per second and this process's CPU µs per job, reserving then settling GROUP jobs per operation. */
async function measureGroups(db: Db, wallets: string[]): Promise<{ rate: number; cpuMicros: number }> {
  const run = randomBytes(4).toString("hex");
  const { worker, treasury } = splitPayout(37, false);
  const payouts = [
    { accountId: workerAccountId("bench-worker"), amount: worker, code: "worker_payout" as const },
    { accountId: TREASURY_ACCOUNT, amount: treasury, code: "protocol_fee" as const },
  ];
  const cpu = process.cpuUsage();
  const started = performance.now();
  for (let first = 0; first < JOBS; first += GROUP) {
    const jobs = Array.from({ length: Math.min(GROUP, JOBS - first) }, (_, i) => ({ id: `${run}-${first + i}`, wallet: wallets[(first + i) % wallets.length]! }));
    await db.transaction((tx) => reserveAll(tx, jobs.map((j) => ({ id: `${j.id}:r`, wallet: j.wallet, amount: 500_000n, reference: j.id }))));
    await db.transaction((tx) =>
      resolveAll(tx, jobs.map((j) => ({ id: `${j.id}:s`, pendingId: `${j.id}:r`, post: true, amount: 370_000n, code: "charge" as const, payouts }))),
    );
  }
  const used = process.cpuUsage(cpu);
  return { rate: JOBS / ((performance.now() - started) / 1000), cpuMicros: (used.user + used.system) / JOBS };
}

const targets: Target[] = [
  { name: "pglite memory", concurrency: [1, 8], open: async () => { const db = await openDb(); return { db, cleanup: () => db.close() }; } },
  {
    name: "pglite disk",
    concurrency: [1, 8],
    open: async () => {
      const dataDir = await mkdtemp(join(tmpdir(), "svc-bench-"));
      const db = await openDb({ dataDir });
      return { db, cleanup: async () => { await db.close(); await rm(dataDir, { recursive: true, force: true }); } };
    },
  },
  { name: "sqlite memory", concurrency: [1, 8], open: async () => { const db = await openSqlite(); return { db, cleanup: () => db.close() }; } },
  {
    name: "sqlite disk",
    concurrency: [1, 8],
    open: async () => {
      const dataDir = await mkdtemp(join(tmpdir(), "svc-bench-"));
      const db = await openSqlite(dataDir);
      return { db, cleanup: async () => { await db.close(); await rm(dataDir, { recursive: true, force: true }); } };
    },
  },
];
const url = process.env.DATABASE_URL;
if (url) {
  targets.push({
    name: "postgres",
    concurrency: [1, 8, 32],
    open: async () => {
      const schema = `bench_${randomBytes(4).toString("hex")}`;
      const admin = await openDb({ databaseUrl: url, poolSize: 1 });
      await admin.exec(`CREATE SCHEMA ${schema}`);
      const db = await openDb({ databaseUrl: url, schema, poolSize: 32 });
      return { db, cleanup: async () => { await db.close(); await admin.exec(`DROP SCHEMA ${schema} CASCADE`); await admin.close(); } };
    },
  });
}

console.log(`ledger bench: ${JOBS} jobs per row, ${WALLETS} wallets; jobs/s (each job = 2 ledger operations)`);
console.log("backend        | in flight | reserve+settle | reserve+post");
const grouped: string[] = [];
for (const target of targets) {
  const { db, cleanup } = await target.open();
  try {
    const wallets = await prepare(db);
    await measure(db, wallets, reservePost, 4); // warm up
    for (const c of target.concurrency) {
      const settleRate = await measure(db, wallets, reserveSettle, c);
      const postRate = await measure(db, wallets, reservePost, c);
      console.log(`${target.name.padEnd(14)} | ${String(c).padStart(9)} | ${settleRate.toFixed(0).padStart(14)} | ${postRate.toFixed(0).padStart(12)}`);
    }
    const { rate, cpuMicros } = await measureGroups(db, wallets);
    grouped.push(`${target.name.padEnd(14)} | ${rate.toFixed(0).padStart(6)} | ${cpuMicros.toFixed(0).padStart(22)}`);
  } finally {
    await cleanup();
  }
}
console.log(`\nreserve+settle in groups of ${GROUP} jobs per operation`);
console.log("backend        | jobs/s | this process's CPU µs/job");
for (const line of grouped) console.log(line);
