/**
 * Chain-layer timings on the embedded LiteSVM chain: building and signing escrow and settlement
 * transactions, sending them (in memory, and on disk where each acknowledgement waits for fsync),
 * concurrent sends sharing fsyncs, several escrow locks to a transaction, and reopening a data dir.
 *
 * Run: node --import tsx bench/chain.ts [jobs=1000]
 */
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { MAX_LOCKS_PER_TRANSACTION, openLiteSvmBackend, type LiteSvmBackend, openChain, type Chain, type PreparedTransaction } from "../src/chain/index.ts";
import { generateKeypair } from "../src/core/keys.ts";
import { newId } from "../src/core/ids.ts";
import { outputHash, proofMessage } from "../src/core/proof.ts";

const JOBS = Number(process.argv[2] ?? 1000);

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
