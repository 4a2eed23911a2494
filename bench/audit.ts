/**
 * Audits of honest workers: N paid completions on a gateway with three honest in-process workers
 * running the wiring model through llama.cpp, every settled job audited (auditShare 1), at
 * temperatures 0, 0.7 and 1.3, with and without a caller's seed, requests sent 4 at a time. It
 * prints how many audits reproduced the worker's output (the false-finding rate of honest
 * workers) and what an audit costs: the re-executions it ran and the time of a run of the same
 * jobs with audits off, measured in the same process.
 *
 * Run: node --import tsx bench/audit.ts [jobs=60]
 */
import { performance } from "node:perf_hooks";
import { startService, type Service } from "../src/service.ts";
import { testWorker } from "../test/support/service.ts";
import { fundedClient } from "./support.ts";

const JOBS = Number(process.argv[2] ?? 60);
const MODEL = "svc-dev/wiring-model";
const TEMPERATURES = [0, 0.7, 1.3];

async function run(auditShare: number): Promise<{ ms: number; service: Service }> {
  const service = await startService({ port: 0, seedWorkers: [await testWorker(), await testWorker(), await testWorker()], rateLimit: false, disputes: { auditShare } });
  const client = await fundedClient(service, 100 * JOBS);
  const started = performance.now();
  for (let i = 0; i < JOBS; i += 4) {
    await Promise.all(
      Array.from({ length: Math.min(4, JOBS - i) }, (_, k) => {
        const n = i + k;
        return client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `Hello ${n}` }], temperature: TEMPERATURES[n % 3]!, ...(n % 2 ? { seed: n } : {}) });
      }),
    );
  }
  // Audits run after each settlement; wait until every one has an outcome.
  for (;;) {
    const [open] = await service.db.query<{ n: number }>("SELECT CAST(count(*) AS integer) AS n FROM jobs WHERE status = 'settled' AND audit_outcome IS NULL");
    if (auditShare === 0 || Number(open!.n) === 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  return { ms: performance.now() - started, service };
}

const plain = await run(0);
await plain.service.close();
const audited = await run(1);
const outcomes = await audited.service.db.query<{ audit_outcome: string; n: number }>("SELECT audit_outcome, CAST(count(*) AS integer) AS n FROM jobs WHERE status = 'settled' GROUP BY audit_outcome");
const slashed = await audited.service.db.query("SELECT 1 FROM events WHERE name = 'worker.slashed'");
await audited.service.close();
console.log(`jobs: ${JOBS} (temperatures ${TEMPERATURES.join(", ")}; half with a caller's seed; 4 at a time; 3 honest workers)`);
console.log(`audit outcomes: ${outcomes.map((o) => `${o.audit_outcome ?? "none"} ${o.n}`).join(", ")}; workers slashed: ${slashed.length}`);
console.log(`wall time: audits off ${plain.ms.toFixed(0)} ms, every job audited ${audited.ms.toFixed(0)} ms (${(audited.ms / plain.ms).toFixed(2)}x)`);
console.log("an audit re-runs the job on 2 other workers here (up to 3 where more host the model); at the default 1% share that is 0.02-0.03 extra generations per job");
process.exit(0);
