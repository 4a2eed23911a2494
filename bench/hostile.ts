/**
 * An honest caller beside hostile workers and a hostile disputer: a gateway with three seed
 * workers running the wiring model in its process, and an honest wallet sending paid JSON
 * completions back to back (in this process: what it shows is the attack's effect on the
 * gateway, not the caller's network). For each attack it prints the honest caller's p50 and p99
 * latency and failures, what the attack cost the vouched workers (the checks run on workers on
 * probation per honest job, and the re-executions arbitration ran) and what the disputes cost
 * their wallet (bonds forfeited, or still held by disputes not yet decided).
 *
 * Attacks: none; 10 sybils answering "framed"; 50 workers refusing every request as its fault;
 * 500 stalling keys from 250 addresses of one /24; 30 wrong-hash disputes from one wallet.
 *
 * Run: node --import tsx bench/hostile.ts [honest requests per attack = 40]
 */
import { performance } from "node:perf_hooks";
import { outputHash } from "../src/core/proof.ts";
import { availableCredits } from "../src/jobs/money.ts";
import { MODEL, migratedTestDb, startTestGateway, testWorker, type TestGateway } from "../test/support/service.ts";
import { startSybil, type SybilBehaviour, type SybilWorker } from "../test/support/sybil-worker.ts";

const REQUESTS = Number(process.argv[2] ?? 40);

interface Attack {
  name: string;
  /** The attack's workers, what it does meanwhile, and the paid jobs it sends itself. */
  start(gateway: TestGateway): Promise<{ sybils: SybilWorker[]; during?: Promise<DisputerCost>; ownJobs?: number }>;
}

/** What the disputes cost their wallet so far, in credits. */
type DisputerCost = () => Promise<number>;

async function sybils(gateway: TestGateway, count: number, behaviour: SybilBehaviour, network: string, addresses = count): Promise<SybilWorker[]> {
  const joined = await Promise.all(
    Array.from({ length: count }, (_, i) => startSybil(gateway.service.origin, behaviour, { localAddress: `${network}.${1 + (i % addresses)}` }).catch(() => undefined)),
  );
  return joined.filter((s): s is SybilWorker => s !== undefined);
}

async function disputeStorm(gateway: TestGateway): Promise<DisputerCost> {
  const attacker = await gateway.newAccount(500);
  const jobs: string[] = [];
  for (let i = 0; i < 30; i++) {
    const { response } = await attacker.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `x ${i}` }] }).withResponse();
    jobs.push(response.headers.get("x-svc-job-id")!);
  }
  const before = await availableCredits(gateway.service.db, attacker.wallet);
  await Promise.all(
    jobs.map((id) =>
      fetch(`${gateway.baseUrl}/jobs/${id}/dispute`, {
        method: "POST",
        headers: { authorization: `Bearer ${attacker.apiKey}`, "content-type": "application/json" },
        body: JSON.stringify({ received_output_hash: outputHash("framed") }),
      }),
    ),
  );
  return async () => before - (await availableCredits(gateway.service.db, attacker.wallet));
}

const ATTACKS: Attack[] = [
  { name: "none", start: async () => ({ sybils: [] }) },
  { name: "10 sybils answering 'framed'", start: async (g) => ({ sybils: await sybils(g, 10, { answer: "framed" }, "127.0.2") }) },
  { name: "50 workers refusing everything", start: async (g) => ({ sybils: await sybils(g, 50, "refuse", "127.0.3") }) },
  { name: "500 stalling keys, 250 addresses", start: async (g) => ({ sybils: await sybils(g, 500, "stall", "127.0.4", 250) }) },
  { name: "30 wrong-hash disputes, one wallet", start: async (g) => ({ sybils: [], during: disputeStorm(g), ownJobs: 30 }) },
];

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

async function honestRun(gateway: TestGateway): Promise<{ ms: number[]; failed: number }> {
  const ms: number[] = [];
  let failed = 0;
  for (let i = 0; i < REQUESTS; i++) {
    const started = performance.now();
    try {
      await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `Hello ${i}` }], max_tokens: 20 }, { timeout: 120_000 });
      ms.push(performance.now() - started);
    } catch {
      failed++;
    }
  }
  return { ms: ms.sort((a, b) => a - b), failed };
}

async function measure(attack: Attack): Promise<string> {
  const workers = [await testWorker(), await testWorker(), await testWorker()];
  const gateway = await startTestGateway({ db: await migratedTestDb(), workers, credits: 100_000, rateLimit: false, disputes: { windowMs: 60_000, arbitrationRetryMs: 1_000 } });
  const reexecutions = { count: 0 };
  for (const w of workers) {
    const run = w.run.bind(w);
    // Counts every job a vouched worker runs beyond the callers' own: arbitration and audits.
    w.run = (job, signal) => {
      reexecutions.count++;
      return run(job, signal);
    };
  }
  let joined: SybilWorker[] = [];
  try {
    const started = await attack.start(gateway);
    joined = started.sybils;
    const before = reexecutions.count;
    const { ms, failed } = await honestRun(gateway);
    const disputerCost = await started.during;
    // Arbitration's re-executions run after the disputes; give them the time they take here.
    if (started.during) await new Promise((resolve) => setTimeout(resolve, 5_000));
    const checks = joined.reduce((sum, s) => sum + s.jobs, 0);
    const extra = reexecutions.count - before - ms.length - failed - (started.ownJobs ?? 0);
    return [
      attack.name.padEnd(36),
      `${percentile(ms, 0.5).toFixed(1).padStart(7)} ms`,
      `${percentile(ms, 0.99).toFixed(1).padStart(8)} ms`,
      `${String(failed).padStart(6)}`,
      `${String(joined.length).padStart(8)}`,
      `${(checks / REQUESTS).toFixed(2).padStart(12)}`,
      `${String(extra).padStart(14)}`,
      `${(disputerCost ? String(await disputerCost()) : "-").padStart(13)}`,
    ].join("  ");
  } finally {
    for (const sybil of joined) sybil.close();
    await gateway.close();
  }
}

console.log(`honest caller: ${REQUESTS} paid JSON completions back to back per attack, 3 seed workers (wiring model)`);
console.log(["attack".padEnd(36), "p50".padStart(10), "p99".padStart(11), "failed", "admitted", "checks/job", "vouched extra", "disputer paid"].join("  "));
for (const attack of ATTACKS) console.log(await measure(attack));
process.exit(0);
