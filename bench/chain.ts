/**
 * Chain-layer timings on the embedded LiteSVM chain: building and signing escrow and settlement
 * transactions, sending them (in memory, and on disk where each acknowledgement waits for fsync),
 * concurrent sends sharing fsyncs, several escrow locks to a transaction, and reopening a data dir.
 * Then what the chain costs per job when each job is locked and settled in transactions of its own
 * against when jobs share escrow tables (docs/program.md, "Escrow tables"), in memory and on disk.
 *
 * Run: node --import tsx bench/chain.ts [jobs=1000]
 */
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import {
  MAX_LOCKS_PER_TRANSACTION,
  MAX_TABLE_LOCKS_PER_TRANSACTION,
  MAX_TABLE_SETTLEMENTS_PER_TRANSACTION,
  openLiteSvmBackend,
  type LiteSvmBackend,
  openChain,
  type Chain,
  type PreparedTransaction,
  type TableSettlementJob,
} from "../src/chain/index.ts";
import { addressBytes } from "../src/chain/addresses.ts";
import { ThreadedChainBackend } from "../src/chain/chain-thread.ts";
import { generateKeypair, type Keypair } from "../src/core/keys.ts";
import { newId } from "../src/core/ids.ts";
import { outputHash, proofMessage } from "../src/core/proof.ts";
import { settlementMessageOf } from "../src/core/settlement-proof.ts";
import { creditsToBaseUnits } from "../src/core/units.ts";

const JOBS = Number(process.argv[2] ?? 1000);
// Taken before any work, so the comparison at the end can show the load this run started under.
const LOAD_AT_START = loadavg();

function stats(name: string, samples: number[]): void {
  const sorted = [...samples].sort((a, b) => a - b);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  console.log(`${name.padEnd(44)} mean ${mean.toFixed(3)} ms  p50 ${at(0.5).toFixed(3)}  p99 ${at(0.99).toFixed(3)}  (n=${samples.length})`);
}

async function timed<T>(samples: number[], fn: () => Promise<T>): Promise<T> {
  const t = performance.now();
  const result = await fn();
  samples.push(performance.now() - t);
  return result;
}

async function lifecycle(label: string, chain: Chain): Promise<void> {
  const wallets = Array.from({ length: 16 }, () => generateKeypair().address);
  for (const wallet of wallets) await chain.deposit({ wallet, credits: 1_000_000 });
  const workers = Array.from({ length: 8 }, () => generateKeypair());
  const prepLock: number[] = [], sendLock: number[] = [], prepSettle: number[] = [], sendSettle: number[] = [];
  for (let i = 0; i < JOBS; i++) {
    const jobId = newId("job");
    const wallet = wallets[i % wallets.length]!;
    const worker = workers[i % workers.length]!;
    const lock = await timed(prepLock, () => chain.prepareLockEscrow({ jobId, tier: "standard", wallet, credits: 12 }));
    await timed(sendLock, () => chain.send(lock.wire));
    const proofHash = outputHash(`output ${i}`);
    const proofSignature = worker.sign(proofMessage(jobId, proofHash));
    const settle = await timed(prepSettle, () =>
      chain.prepareSettle({ jobId, wallet, creditsLocked: 12, creditsCharged: 9, workerPublicKey: worker.address, proofHash, proofSignature }),
    );
    await timed(sendSettle, () => chain.send(settle.wire));
  }
  console.log(`\n${label}`);
  stats("prepareLockEscrow (build + sign)", prepLock);
  stats("send escrow lock", sendLock);
  stats("prepareSettle (build + sign)", prepSettle);
  stats("send settlement", sendSettle);

  // Many requests at once: sends share fsyncs (group commit).
  const batch = 256;
  const prepared: PreparedTransaction[] = [];
  for (let i = 0; i < batch; i++) {
    prepared.push(await chain.prepareLockEscrow({ jobId: newId("job"), tier: "lite", wallet: wallets[i % wallets.length]!, credits: 2 }));
  }
  const t = performance.now();
  await Promise.all(prepared.map((p) => chain.send(p.wire)));
  const ms = performance.now() - t;
  console.log(`${`${batch} concurrent escrow sends`.padEnd(44)} ${ms.toFixed(1)} ms total, ${((batch / ms) * 1000).toFixed(0)} tx/s`);
}

/**
 * Escrow locks k to a transaction, sent one transaction after another: the time and this process's
 * CPU per lock (the backend runs in this process, so the CPU includes the chain's own work).
 */
async function lockBatches(chain: Chain): Promise<void> {
  const wallets = Array.from({ length: MAX_LOCKS_PER_TRANSACTION }, () => generateKeypair().address);
  for (const wallet of wallets) await chain.deposit({ wallet, credits: 1_000_000 });
  // A multiple of 60, so every k from 1 to 5 sends the same locks in whole transactions.
  const locks = Math.max(60, JOBS - (JOBS % 60));
  for (let k = 1; k <= MAX_LOCKS_PER_TRANSACTION; k++) {
    const jobs = (i: number) => Array.from({ length: k }, (_, j) => ({ jobId: newId("job"), tier: "lite" as const, wallet: wallets[j]!, credits: 2 + (i % 3) }));
    const cpu = process.cpuUsage();
    let t = performance.now();
    const prepared: PreparedTransaction[] = [];
    for (let i = 0; i < locks / k; i++) prepared.push(await chain.prepareLockEscrows(jobs(i)));
    const prepareMs = performance.now() - t;
    const prepareCpu = process.cpuUsage(cpu);
    const sendCpu = process.cpuUsage();
    t = performance.now();
    for (const p of prepared) await chain.send(p.wire);
    const sendMs = performance.now() - t;
    const sent = process.cpuUsage(sendCpu);
    const perLock = (ms: number) => ((ms / locks) * 1000).toFixed(0);
    console.log(
      `${`${k} escrow lock(s) a transaction (${prepared[0]!.wire.length} B)`.padEnd(44)} per lock: prepare ${perLock(prepareMs)} µs (CPU ${perLock((prepareCpu.user + prepareCpu.system) / 1000)}), ` +
        `send ${perLock(sendMs)} µs (CPU ${perLock((sent.user + sent.system) / 1000)}), n=${locks}`,
    );
  }
}

/** Wall time and this process's CPU time (user + system, all threads: the chain's thread too) of one phase. */
interface Cost {
  ms: number;
  cpuMs: number;
}

/** What a design cost for its jobs: its transactions, and its locks' and settlements' prepare and send phases together. */
interface DesignCost {
  jobs: number;
  transactions: number;
  prepare: Cost;
  send: Cost;
}

/** What a round of a design works with: a funded wallet, one worker, the round's jobs. */
interface Round {
  chain: Chain;
  wallet: string;
  worker: Keypair;
  jobIds: string[];
  /** The id of the round's first table (table design); the round's jobs fill tables from it on. */
  firstTableId: bigint;
}

// The lock and charge of lifecycle(), so both designs move the same amounts.
const LOCK_CREDITS = 12;
const CHARGE_CREDITS = 9;
const TABLE_SLOTS = 128;
/**
 * Jobs prepared then sent in one go. Rounds keep each transaction's blockhash (valid 150 slots,
 * 60 s) and each table's locking window (60 s from its opening) well within bounds however many
 * jobs or however slow the disk; two whole tables a round, so tables fill as in service.
 */
const ROUND_JOBS = 2 * TABLE_SLOTS;
const NO_COST: Cost = { ms: 0, cpuMs: 0 };

const plus = (a: Cost, b: Cost): Cost => ({ ms: a.ms + b.ms, cpuMs: a.cpuMs + b.cpuMs });

async function measured(fn: () => Promise<void>): Promise<Cost> {
  const cpu = process.cpuUsage();
  const t = performance.now();
  await fn();
  const ms = performance.now() - t;
  const used = process.cpuUsage(cpu);
  return { ms, cpuMs: (used.user + used.system) / 1000 };
}

/** One transaction after another, each awaiting the chain thread's acknowledgement, as lifecycle() sends. */
async function sendEach(chain: Chain, prepared: readonly PreparedTransaction[]): Promise<void> {
  for (const p of prepared) await chain.send(p.wire);
}

/** `items` in runs of at most `size`, each with the position of its first item. */
function runs<T>(items: readonly T[], size: number): { first: number; items: T[] }[] {
  const out: { first: number; items: T[] }[] = [];
  for (let first = 0; first < items.length; first += size) out.push({ first, items: items.slice(first, first + size) });
  return out;
}

/** Per-job design: each job's lock in a transaction of its own, then each job's settlement. */
async function perJobRound({ chain, wallet, worker, jobIds }: Round): Promise<DesignCost> {
  const locks: PreparedTransaction[] = [];
  const prepareLocks = await measured(async () => {
    for (const jobId of jobIds) locks.push(await chain.prepareLockEscrow({ jobId, tier: "standard", wallet, credits: LOCK_CREDITS }));
  });
  const sendLocks = await measured(() => sendEach(chain, locks));
  // The worker signs on its own machine, not the gateway's: untimed, as in lifecycle().
  const proofs = jobIds.map((jobId, i) => {
    const proofHash = outputHash(`output ${i}`);
    return { jobId, proofHash, proofSignature: worker.sign(proofMessage(jobId, proofHash)) };
  });
  const settlements: PreparedTransaction[] = [];
  const prepareSettlements = await measured(async () => {
    for (const proof of proofs) {
      settlements.push(await chain.prepareSettle({ ...proof, wallet, creditsLocked: LOCK_CREDITS, creditsCharged: CHARGE_CREDITS, workerPublicKey: worker.address }));
    }
  });
  const sendSettlements = await measured(() => sendEach(chain, settlements));
  return { jobs: jobIds.length, transactions: locks.length + settlements.length, prepare: plus(prepareLocks, prepareSettlements), send: plus(sendLocks, sendSettlements) };
}

/** The worker's signed settlements of one table's jobs (slots 0 on), MAX_TABLE_SETTLEMENTS_PER_TRANSACTION each. */
function signedSettlements(chain: Chain, worker: Keypair, wallet: string, tableId: bigint, jobIds: string[]): { tableId: bigint; jobs: TableSettlementJob[]; signature: Uint8Array }[] {
  const table = addressBytes(chain.tableAddressFor(wallet, tableId));
  return runs(jobIds, MAX_TABLE_SETTLEMENTS_PER_TRANSACTION).map(({ first, items }) => {
    const jobs = items.map((jobId, j): TableSettlementJob => ({ jobId, slot: first + j, creditsCharged: CHARGE_CREDITS, proofHash: outputHash(`output ${first + j}`), promptTokens: 10, completionTokens: 20 }));
    const leaves = jobs.map((job) => ({ ...job, outputHash: Buffer.from(job.proofHash.slice("sha256:".length), "hex"), charge: creditsToBaseUnits(job.creditsCharged) }));
    return { tableId, jobs, signature: worker.sign(settlementMessageOf(table, leaves)) };
  });
}

/** Table design: the round's jobs fill fresh tables of TABLE_SLOTS, locked 29 and settled 32 to a transaction. */
async function tableRound({ chain, wallet, worker, jobIds, firstTableId }: Round): Promise<DesignCost> {
  const tables = runs(jobIds, TABLE_SLOTS).map(({ items }, t) => ({ tableId: firstTableId + BigInt(t), jobIds: items }));
  const locks: PreparedTransaction[] = [];
  const prepareLocks = await measured(async () => {
    for (const { tableId, jobIds: tableJobs } of tables) {
      for (const { first, items } of runs(tableJobs, MAX_TABLE_LOCKS_PER_TRANSACTION)) {
        const jobs = items.map((jobId) => ({ jobId, tier: "standard" as const, credits: LOCK_CREDITS }));
        locks.push(await chain.prepareTableLock({ wallet, tableId, capacity: TABLE_SLOTS, firstSlot: first, jobs }));
      }
    }
  });
  const sendLocks = await measured(() => sendEach(chain, locks));
  // The worker's one signature per settlement is its own work, untimed as in perJobRound.
  const signed = tables.flatMap((t) => signedSettlements(chain, worker, wallet, t.tableId, t.jobIds));
  const settlements: PreparedTransaction[] = [];
  const prepareSettlements = await measured(async () => {
    for (const s of signed) settlements.push(await chain.prepareTableSettlement({ wallet, tableId: s.tableId, worker: worker.address, signature: s.signature, jobs: s.jobs }));
  });
  const sendSettlements = await measured(() => sendEach(chain, settlements));
  return { jobs: jobIds.length, transactions: locks.length + settlements.length, prepare: plus(prepareLocks, prepareSettlements), send: plus(sendLocks, sendSettlements) };
}

/** A design's cost for `jobs` jobs of a new wallet (so its tables are new too) and one worker, round after round. */
async function designCost(chain: Chain, jobs: number, round: (r: Round) => Promise<DesignCost>): Promise<DesignCost> {
  const wallet = generateKeypair().address;
  await chain.deposit({ wallet, credits: jobs * LOCK_CREDITS });
  const worker = generateKeypair();
  let total: DesignCost = { jobs: 0, transactions: 0, prepare: NO_COST, send: NO_COST };
  for (let first = 0; first < jobs; first += ROUND_JOBS) {
    const jobIds = Array.from({ length: Math.min(ROUND_JOBS, jobs - first) }, () => newId("job"));
    const cost = await round({ chain, wallet, worker, jobIds, firstTableId: BigInt(first / TABLE_SLOTS) + 1n });
    total = { jobs: total.jobs + cost.jobs, transactions: total.transactions + cost.transactions, prepare: plus(total.prepare, cost.prepare), send: plus(total.send, cost.send) };
  }
  return total;
}

function printDesign(name: string, cost: DesignCost): void {
  const perJob = (ms: number) => ((ms / cost.jobs) * 1000).toFixed(0);
  console.log(
    `${name.padEnd(44)} per job: ${(cost.transactions / cost.jobs).toFixed(3)} tx, prepare ${perJob(cost.prepare.ms)} µs (CPU ${perJob(cost.prepare.cpuMs)}), ` +
      `send ${perJob(cost.send.ms)} µs (CPU ${perJob(cost.send.cpuMs)}), n=${cost.jobs}`,
  );
}

/**
 * Both designs, each on a chain of its own opened by `open` (so neither inherits the other's
 * accounts), each after an untimed warm-up of one table's worth of jobs (so neither pays the
 * first-run compilation of its code paths, in JavaScript or in the program's loading).
 */
async function compareDesigns(label: string, open: () => Promise<{ chain: Chain; close(): Promise<void> }>): Promise<void> {
  const designs = [
    ["per-job design (1 job a tx)", perJobRound],
    [`table design (${MAX_TABLE_LOCKS_PER_TRANSACTION} locks, ${MAX_TABLE_SETTLEMENTS_PER_TRANSACTION} settlements a tx)`, tableRound],
  ] as const;
  console.log(`${label}:`);
  const costs: DesignCost[] = [];
  for (const [name, round] of designs) {
    const { chain, close } = await open();
    try {
      await designCost(chain, TABLE_SLOTS, round);
      const cost = await designCost(chain, JOBS, round);
      printDesign(name, cost);
      costs.push(cost);
    } finally {
      await close();
    }
  }
  const [perJob, table] = costs as [DesignCost, DesignCost];
  const ratio = (f: (c: DesignCost) => number) => (f(perJob) / perJob.jobs / (f(table) / table.jobs)).toFixed(1);
  console.log(`${"per-job design / table design".padEnd(44)} send time per job ${ratio((c) => c.send.ms)}x, send CPU per job ${ratio((c) => c.send.cpuMs)}x`);
}

/** A fresh on-disk chain on its own thread, as the service runs it, its data dir removed at close. */
async function openOnDisk(): Promise<{ chain: Chain; close(): Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), "svc-chain-bench-designs-"));
  // No checkpoint while measuring: one would land in whichever phase crossed the threshold.
  const backend = await ThreadedChainBackend.open({ dataDir: join(dir, "chain"), checkpointEvery: 1e9, checkpointIntervalMs: 1e9 });
  const chain = await openChain({ dataDir: dir, backend });
  return { chain, close: async () => (await chain.close(), rmSync(dir, { recursive: true, force: true })) };
}

const loadText = (load: number[]) => load.map((l) => l.toFixed(2)).join(" ");

const memory = await openChain({});
await lifecycle("in memory", memory);
await memory.close();

const dir = mkdtempSync(join(tmpdir(), "svc-chain-bench-"));
const crashed = mkdtempSync(join(tmpdir(), "svc-chain-bench-crashed-"));
try {
  // No checkpoint during the run: a copy of the data dir taken while open is what a crash leaves.
  const backend = await openLiteSvmBackend({ dataDir: join(dir, "chain"), checkpointEvery: 1e9, checkpointIntervalMs: 1e9 });
  const disk = await openChain({ dataDir: dir, backend });
  await lifecycle(`on disk (${dir}, fsync per acknowledgement)`, disk);
  cpSync(dir, crashed, { recursive: true, filter: (path) => !path.endsWith("LOCK") });
  await lockBatches(disk);
  await disk.close();

  let t = performance.now();
  const replayed = await openChain({ dataDir: crashed });
  console.log(`${`reopen after a crash: replay ${2 * JOBS + 256 + 16}+ records`.padEnd(44)} ${(performance.now() - t).toFixed(0)} ms`);
  await replayed.close();
  t = performance.now();
  const restored = await openChain({ dataDir: dir });
  console.log(`${"reopen after close: load the checkpoint".padEnd(44)} ${(performance.now() - t).toFixed(0)} ms`);
  await restored.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
  rmSync(crashed, { recursive: true, force: true });
}

console.log(`\nchain cost per job: per-job design against table design, ${JOBS} jobs of one wallet and one worker each`);
console.log(`${"load average (1, 5, 15 min)".padEnd(44)} at start of the script ${loadText(LOAD_AT_START)}, now ${loadText(loadavg())}`);
await compareDesigns("in memory", async () => {
  const chain = await openChain({});
  return { chain, close: () => chain.close() };
});
await compareDesigns("on disk (fsync per acknowledgement)", openOnDisk);
console.log(`${"load average (1, 5, 15 min) at end".padEnd(44)} ${loadText(loadavg())}`);
