/**
 * What one job costs on the chain, read from the chain itself, in two parts.
 *
 * The Chain API alone: for N jobs that lock, settle with a real worker proof, and N that lock and
 * refund, the transactions sent, the signatures their fees were charged for, the fees, and
 * everything else the service's paying keys spent (rent that did not come back): the fee payer's
 * and the service authority's lamports together, since which of the two pays a job's transactions
 * depends on the commit measured. Works on any commit whose Chain has lockEscrow/settle/refund, so
 * the same script measures before and after a change to the money path. Where the Chain has escrow
 * tables, the same for jobs in full tables of 128, batched as full as a transaction allows.
 *
 * The whole service at given request rates: for each rate a fresh service on svc dev's embedded
 * defaults (SQLite and the chain in a new data dir) with a seed worker on the wiring model, driven
 * open-loop for `seconds` by a caller in a process of its own (paced-client.ts); then every job
 * settled, and the same figures read from the chain, per job: what the service chose to batch or
 * not under load is what it costs. Also the rent parked in the escrow program's job accounts at
 * the moment the load ends (the sweeper gives it back only after the dispute window), per job
 * still holding one.
 *
 * Each rate is measured with each escrow design (`--escrows`): a record per job, and slots of the
 * wallets' escrow tables settled in batches (JobServiceOptions.escrowTables).
 *
 * Run: npm run bench:job-cost -- [jobs (50)] [--rates 1,10,100] [--seconds 20] [--escrows records,tables] [--job-ms <n>]
 */
import { mkdtemp, rm } from "node:fs/promises";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as sleep } from "node:timers/promises";
import { parseArgs } from "node:util";
import * as chainPart from "../src/chain/index.ts";
import { openChain, type Chain } from "../src/chain/index.ts";
import { addressBytes } from "../src/chain/addresses.ts";
import * as core from "../src/core/index.ts";
import { isEmbedded, type EmbeddedChainBackend } from "../src/chain/backend.ts";
import { Tag, decodeTable } from "../src/chain/escrow-program/index.ts";
import { parseTransaction } from "../src/chain/wire.ts";
import { base58Encode } from "../src/core/index.ts";
import { generateKeypair } from "../src/core/keys.ts";
import { newId } from "../src/core/ids.ts";
import { outputHash, proofMessage } from "../src/core/proof.ts";
import type { Service } from "../src/service.ts";
import { MODEL, startTestGateway } from "../test/support/service.ts";
import { drivePaced, type PacedResult } from "./paced-client.ts";
import { BENCH_MODEL, startWorkerProcess } from "./worker-process.ts";
import { until } from "../test/support/eventually.ts";
import { openJobCount } from "./support.ts";

const { values: flags, positionals } = parseArgs({
  options: { rates: { type: "string", default: "1,10,100" }, seconds: { type: "string", default: "20" }, escrows: { type: "string", default: "records,tables" }, "job-ms": { type: "string" } },
  allowPositionals: true,
});
const JOBS = Number(positionals[0] ?? 50);
const RATES = flags.rates.split(",").map(Number);
const SECONDS = Number(flags.seconds);
/** The service's escrow designs measured at each rate: a record per job, or slots of the wallets' escrow tables. */
const DESIGNS = flags.escrows.split(",");
/**
 * --job-ms <n>: the jobs are served by a worker in a process of its own over the worker protocol,
 * from an OpenAI-compatible upstream that answers after n ms (worker-process.ts), instead of the
 * seed worker on the wiring model: jobs as long as a real model's, at rates this machine's CPU
 * could not generate.
 */
const JOB_MS = flags["job-ms"] === undefined ? undefined : Number(flags["job-ms"]);
if (JOB_MS !== undefined && !(JOB_MS >= 0)) throw new RangeError(`--job-ms takes a number of milliseconds, got ${flags["job-ms"]}`);
if (!DESIGNS.every((d) => d === "records" || d === "tables")) throw new RangeError(`--escrows takes records and/or tables, got ${flags.escrows}`);
if (!RATES.every((r) => r > 0 && Number.isFinite(r)) || !(SECONDS > 0)) throw new RangeError(`--rates takes positive numbers and --seconds a positive number, got ${flags.rates} and ${flags.seconds}`);
const LAMPORTS_PER_SIGNATURE = 5_000n;

interface Cost {
  transactions: number;
  signatures: bigint;
  feeLamports: bigint;
  payerSpentLamports: bigint;
}

async function payerLamports(chain: Chain): Promise<bigint> {
  const [feePayer, authority] = await Promise.all([chain.feePayer, chain.serviceAuthority].map((a) => chain.backend.getAccount(a)));
  return (feePayer?.lamports ?? 0n) + (authority?.lamports ?? 0n);
}

async function measure(chain: Chain, run: (signatures: string[]) => Promise<void>): Promise<Cost> {
  const before = await payerLamports(chain);
  const signatures: string[] = [];
  await run(signatures);
  let feeLamports = 0n;
  for (const s of signatures) feeLamports += BigInt((await chain.backend.getTransaction(s))?.meta?.fee ?? 0);
  return { transactions: signatures.length, signatures: feeLamports / LAMPORTS_PER_SIGNATURE, feeLamports, payerSpentLamports: before - (await payerLamports(chain)) };
}

function report(name: string, cost: Cost, jobs = JOBS): void {
  const per = (v: bigint | number) => (Number(v) / jobs).toFixed(2);
  console.log(
    `${name.padEnd(22)} per job: ${per(cost.transactions)} transactions, ${per(cost.signatures)} signatures, ` +
      `${per(cost.feeLamports)} lamports in fees, ${per(cost.payerSpentLamports - cost.feeLamports)} lamports of rent kept`,
  );
}

/** The Chain API alone: N jobs that settle, N that refund, one after another. */
async function chainApiCost(): Promise<void> {
  const chain = await openChain({});
  try {
    const wallet = generateKeypair().address;
    const worker = generateKeypair();
    await chain.deposit({ wallet, credits: 10 * JOBS });
    const settled = await measure(chain, async (signatures) => {
      for (let i = 0; i < JOBS; i++) {
        const jobId = newId("job");
        signatures.push((await chain.lockEscrow({ jobId, tier: "lite", wallet, credits: 3 })).signature);
        const proofHash = outputHash(`output ${i}`);
        const input = { jobId, wallet, creditsLocked: 3, creditsCharged: 2, workerPublicKey: worker.address, staked: false, proofHash, proofSignature: worker.sign(proofMessage(jobId, proofHash)) };
        signatures.push((await chain.settle(input)).signature);
      }
    });
    const refunded = await measure(chain, async (signatures) => {
      for (let i = 0; i < JOBS; i++) {
        const jobId = newId("job");
        signatures.push((await chain.lockEscrow({ jobId, tier: "lite", wallet, credits: 3 })).signature);
        signatures.push((await chain.refund({ jobId, wallet, creditsLocked: 3 })).signature);
      }
    });
    report("lock + settle", settled);
    report("lock + refund", refunded);
    // The escrow tables came later: a commit from before them measures the above alone (read
    // through the parts' namespaces, which a named import of a missing export would not allow).
    if (typeof (chain as Partial<Chain>).prepareTableLock === "function") await tableCost(chain, wallet, worker);
  } finally {
    await chain.close();
  }
}

/**
 * Jobs of one wallet in full escrow tables of 128 slots (the jobs rounded up to whole tables),
 * batched as full as a transaction allows: 29 locks, 32 settlements or 128 refunds to one. What
 * a table costs when the service fills it, not when it is partly used.
 */
async function tableCost(chain: Chain, wallet: string, worker: ReturnType<typeof generateKeypair>): Promise<void> {
  const { MAX_TABLE_LOCKS_PER_TRANSACTION, MAX_TABLE_SETTLEMENTS_PER_TRANSACTION } = chainPart;
  const { creditsToBaseUnits, settlementMessageOf } = core;
  const count = Math.ceil(JOBS / 128) * 128;
  await chain.deposit({ wallet, credits: 6 * count });
  let tableId = 1_000n;
  const lockAll = async (signatures: string[]) => {
    const tables: { tableId: bigint; jobs: { jobId: string; slot: number }[] }[] = [];
    for (let at = 0; at < count; at += 128) {
      const jobs = Array.from({ length: 128 }, (_, slot) => ({ jobId: newId("job"), slot }));
      const id = ++tableId;
      for (let from = 0; from < jobs.length; from += MAX_TABLE_LOCKS_PER_TRANSACTION) {
        const some = jobs.slice(from, from + MAX_TABLE_LOCKS_PER_TRANSACTION).map((j) => ({ jobId: j.jobId, tier: "lite" as const, credits: 3 }));
        signatures.push((await chain.send((await chain.prepareTableLock({ wallet, tableId: id, capacity: 128, firstSlot: from, jobs: some })).wire)).signature);
      }
      tables.push({ tableId: id, jobs });
    }
    return tables;
  };
  const settled = await measure(chain, async (signatures) => {
    for (const table of await lockAll(signatures)) {
      for (let from = 0; from < table.jobs.length; from += MAX_TABLE_SETTLEMENTS_PER_TRANSACTION) {
        const jobs = table.jobs.slice(from, from + MAX_TABLE_SETTLEMENTS_PER_TRANSACTION).map((j) => ({ ...j, creditsCharged: 2, proofHash: outputHash(`output ${j.slot}`), promptTokens: 10, completionTokens: 20 }));
        const message = settlementMessageOf(addressBytes(chain.tableAddressFor(wallet, table.tableId)), jobs.map((j) => ({ ...j, outputHash: Buffer.from(j.proofHash.slice(7), "hex"), charge: creditsToBaseUnits(2) })));
        signatures.push((await chain.send((await chain.prepareTableSettlement({ wallet, tableId: table.tableId, worker: worker.address, signature: worker.sign(message), jobs })).wire)).signature);
      }
    }
  });
  const refunded = await measure(chain, async (signatures) => {
    for (const table of await lockAll(signatures)) {
      signatures.push((await chain.send((await chain.prepareSlotRefunds({ wallet, tableId: table.tableId, slots: table.jobs.map((j) => j.slot) })).wire)).signature);
    }
  });
  report(`table lock + settle (${count})`, settled, count);
  report(`table lock + refund (${count})`, refunded, count);
}

/** Each request's completion: a few tokens, so the worker's generation is not what limits the rate. */
const MAX_TOKENS = 8;
/** Far more than any run spends: a wallet that ran dry would turn the load into refusals. */
const CREDITS = 10_000_000;
/** How long the backlog may take to settle after the load before the figures are read anyway. */
const SETTLE_TIMEOUT_MS = 120_000;

/** Lamports held by the escrow program's job accounts, how many there are, and the jobs they hold. */
interface JobRecords {
  lamports: bigint;
  escrows: number;
  tables: number;
  jobs: number;
}

/** What the service's own transactions of a run came to. */
interface Sent {
  transactions: number;
  /** Landed but failed: charged their fee all the same. */
  failed: number;
  signatures: bigint;
  feeLamports: bigint;
}

interface RateCost {
  design: string;
  rate: number;
  client: PacedResult;
  /** The service's jobs by status, after the backlog settled. */
  jobs: Record<string, number>;
  /** When the load ended, and after the backlog settled. */
  parked: JobRecords;
  left: JobRecords;
  sent: Sent;
  /** Lamports the fee payer and the service authority spent, fees included. */
  spent: bigint;
  /** Undefined when the backlog had not settled within SETTLE_TIMEOUT_MS. */
  settleMs?: number;
  loadBefore: number[];
  loadAfter: number[];
}

/** The journal and the program-account scan are the embedded chain's: a cluster's RPC would need other calls. */
function embeddedBackend(chain: Chain): EmbeddedChainBackend {
  if (!isEmbedded(chain.backend)) throw new Error("the service's chain is not the embedded one");
  return chain.backend;
}

/** Escrow records (one job each) and escrow tables (a job a used slot), whatever their status: each keeps its rent until closed. */
async function jobRecords(chain: Chain): Promise<JobRecords> {
  const records: JobRecords = { lamports: 0n, escrows: 0, tables: 0, jobs: 0 };
  for (const account of await embeddedBackend(chain).programAccounts(chain.program)) {
    if (account.data[0] === Tag.escrow) {
      records.escrows += 1;
      records.jobs += 1;
    } else if (account.data[0] === Tag.table) {
      records.tables += 1;
      records.jobs += decodeTable(account.data).slots.length;
    } else continue;
    records.lamports += account.lamports;
  }
  return records;
}

/**
 * The transactions in the chain's journal from record `from` on whose fee payer is one of the
 * service's paying keys: whichever key a commit pays with, and nothing a caller or worker sent.
 * Signatures are read off the fee, as in the Chain API part, so the Ed25519 proofs' count too.
 */
async function serviceTransactions(chain: Chain, from: number): Promise<Sent> {
  const payers = new Set<string>([chain.feePayer, chain.serviceAuthority]);
  const sent: Sent = { transactions: 0, failed: 0, signatures: 0n, feeLamports: 0n };
  for (const record of (await embeddedBackend(chain).history()).slice(from)) {
    if (record.kind !== "tx") continue;
    const parsed = parseTransaction(record.wire);
    if (!payers.has(base58Encode(parsed.accountKeys[0]!))) continue;
    const fee = record.meta?.fee ?? (await chain.backend.getTransaction(base58Encode(parsed.signatures[0]!)))?.meta?.fee ?? 0;
    sent.transactions += 1;
    if (!record.ok) sent.failed += 1;
    sent.feeLamports += BigInt(fee);
  }
  sent.signatures = sent.feeLamports / LAMPORTS_PER_SIGNATURE;
  return sent;
}

/** Milliseconds until no job of the service is unfinished, or undefined after `timeoutMs`. */
async function settledWithin(service: Service, timeoutMs: number): Promise<number | undefined> {
  const started = performance.now();
  while ((await openJobCount(service)) > 0) {
    if (performance.now() - started > timeoutMs) return undefined;
    await sleep(100);
  }
  return performance.now() - started;
}

async function jobStatuses(service: Service): Promise<Record<string, number>> {
  const rows = await service.db.query<{ status: string; n: number }>("SELECT status, CAST(count(*) AS integer) AS n FROM jobs GROUP BY status ORDER BY status");
  return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
}

/** One rate on a service of its own, closed before this returns. */
async function measureRate(rate: number, seconds: number, design: string): Promise<RateCost> {
  const dir = await mkdtemp(join(tmpdir(), "svc-job-cost-"));
  // No per-IP limits: the one caller process stands for many callers.
  const upstream = JOB_MS !== undefined;
  const gateway = await startTestGateway({ dataDir: dir, rateLimit: false, refusalLimit: false, credits: CREDITS, escrowTables: design === "tables", ...(upstream ? { workers: [] } : {}) });
  const worker = upstream ? await startWorkerProcess({ gateway: gateway.service.origin, firstTokenMs: JOB_MS }) : undefined;
  if (worker) gateway.service.trust.vouch(worker.address);
  try {
    const { service } = gateway;
    const chain = service.chain;
    // Marked after the start and the wallet's deposit: the run's cost is its jobs' alone.
    const lamportsBefore = await payerLamports(chain);
    const recordsBefore = (await embeddedBackend(chain).history()).length;
    const loadBefore = loadavg();
    if (worker) await until(async () => gateway.service.pool.hosting(BENCH_MODEL).length, (n) => n > 0, "the worker process to join");
    const client = await drivePaced({ baseUrl: gateway.baseUrl, apiKey: gateway.apiKey, model: worker ? BENCH_MODEL : MODEL, rate, seconds, maxTokens: MAX_TOKENS });
    const loadAfter = loadavg();
    const parked = await jobRecords(chain);
    const settleMs = await settledWithin(service, SETTLE_TIMEOUT_MS);
    const sent = await serviceTransactions(chain, recordsBefore);
    const spent = lamportsBefore - (await payerLamports(chain));
    return { design, rate, client, jobs: await jobStatuses(service), parked, left: await jobRecords(chain), sent, spent, settleMs, loadBefore, loadAfter };
  } finally {
    worker?.close();
    await gateway.close();
    await rm(dir, { recursive: true, force: true });
  }
}

function recordsText(r: JobRecords): string {
  return r.tables === 0 ? `${r.escrows} open records` : `${r.escrows} escrow records and ${r.tables} tables holding ${r.jobs - r.escrows} jobs`;
}

function rateLines(c: RateCost): string[] {
  const jobs = Object.values(c.jobs).reduce((a, b) => a + b, 0);
  const per = (v: bigint | number, digits = 2) => (Number(v) / Math.max(1, jobs)).toFixed(digits);
  const perOpen = c.parked.jobs > 0 ? (Number(c.parked.lamports) / c.parked.jobs).toFixed(0) : "no";
  const load = (l: number[]) => l.map((v) => v.toFixed(2)).join(" ");
  const statuses = Object.entries(c.jobs).map(([status, n]) => `${n} ${status}`).join(", ");
  const failures = Object.entries(c.client.failures).map(([kind, n]) => `${n} × ${kind}`).join(", ");
  return [
    `escrow ${c.design}, rate ${c.rate}/s: ${c.client.sent} requests (${c.client.failed} failed), ${jobs} jobs (${statuses}), per job: ${per(c.sent.transactions)} transactions, ` +
      `${per(c.sent.signatures)} signatures, ${per(c.sent.feeLamports, 0)} lamports in fees, ${perOpen} lamports of rent parked per open job ` +
      `(${recordsText(c.parked)} at the end of the load), ${per(c.spent - c.sent.feeLamports, 0)} lamports of rent not back after settling ` +
      `(${per(c.left.lamports, 0)} in ${recordsText(c.left)}, ${per(c.spent - c.sent.feeLamports - c.left.lamports, 0)} elsewhere); ` +
      `load average ${load(c.loadBefore)} at the start, ${load(c.loadAfter)} at the end`,
    `  answered p50 ${c.client.p50Ms.toFixed(0)} ms, p99 ${c.client.p99Ms.toFixed(0)} ms; caller's latest start ${c.client.maxLagMs.toFixed(0)} ms behind; ` +
      `${c.sent.failed} of the service's transactions failed; ` +
      (c.settleMs === undefined ? `backlog NOT settled within ${SETTLE_TIMEOUT_MS / 1000} s` : `backlog settled ${(c.settleMs / 1000).toFixed(1)} s after the load`) +
      (failures ? `; failures: ${failures}` : ""),
  ];
}

await chainApiCost();
const served = JOB_MS === undefined ? `a seed worker on ${MODEL}` : `a worker process on ${BENCH_MODEL} whose upstream answers after ${JOB_MS} ms`;
console.log(`\nthe whole service (embedded chain and SQLite, ${served}), ${SECONDS} s at each rate, max_tokens ${MAX_TOKENS}:`);
for (const rate of RATES) for (const design of DESIGNS) for (const line of rateLines(await measureRate(rate, SECONDS, design))) console.log(line);
// The engine the seed workers share keeps llama.cpp's threads alive.
process.exit(0);
