/**
 * The load-and-kill story: a couple of hundred concurrent paid requests on one wallet
 * against `svc dev` and a `svc worker` process, `kill -9` of the worker and then of the gateway in
 * the middle of it, a restart on the same data directory. Afterwards no credit is lost or charged
 * twice (what the wallet holds is what it had less what its jobs charged), every completion that
 * was answered in full was charged, no job is left open, and the ledger agrees with the chain.
 */
import assert from "node:assert/strict";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { after, test } from "node:test";
import { openChain } from "../../src/chain/chain.ts";
import { loadOrCreateKeypair } from "../../src/core/keys.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { TRIGGER_WORD } from "../../src/inference/wiring-model.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { openDb } from "../../src/store/index.ts";
import { exited, freePort, killDevs, startDev } from "../support/dev-process.ts";
import { MODEL, tempDir } from "../support/service.ts";
import { killWorkers, spawnWorker, workerAddress } from "../support/worker-process.ts";

const REQUESTS = 200;
const CREDITS = 5000;

const dir = await tempDir("svc-load-kill-");
after(async () => {
  killWorkers();
  killDevs();
  await dir.remove();
});

type Outcome = { kind: "answered"; jobId: string } | { kind: "refused"; status: number } | { kind: "cut" };

/** One paid request; short ones finish, long (looping) ones are still generating when the kills land. */
async function paidRequest(baseUrl: string, apiKey: string, i: number): Promise<Outcome> {
  const long = i % 8 === 0;
  const stream = i % 3 === 0;
  try {
    const response = await fetch(`${baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({
        model: MODEL,
        messages: [{ role: "user", content: long ? `Say ${TRIGGER_WORD}` : `Hello ${i}` }],
        temperature: 0,
        max_tokens: long ? 400 : 4,
        stream,
      }),
    });
    const body = await response.text();
    if (response.status !== 200) return { kind: "refused", status: response.status };
    // A stream is whole only with its [DONE]; a JSON answer only once its body arrived.
    if (stream && !body.includes("data: [DONE]")) return { kind: "cut" };
    return { kind: "answered", jobId: response.headers.get("x-svc-job-id")! };
  } catch {
    return { kind: "cut" };
  }
}

/** Resolves once `count` of the promises have settled. */
function whenSettled(promises: Promise<unknown>[], count: number): Promise<void> {
  let settled = 0;
  return new Promise((resolve) => {
    for (const p of promises) void p.finally(() => ++settled === count && resolve());
  });
}

const since = (start: number) => `${((performance.now() - start) / 1000).toFixed(1)} s`;

test("kill -9 of a worker and of the gateway under load, then restart: every credit accounted for", { timeout: 240_000 }, async (t) => {
  const start = performance.now();
  const port = String(await freePort());
  // Both start at once: the worker dials until the gateway listens.
  const keypair = join(dir.path, "worker.json");
  const seed = ["--seed-workers", await workerAddress(keypair)];
  const [first, worker] = await Promise.all([
    startDev(dir.path, ["--port", port, "--credits", String(CREDITS), ...seed]),
    spawnWorker({ gateway: `http://127.0.0.1:${port}`, keypair, modelsDir: join(dir.path, "models") }),
  ]);
  const apiKey = first.apiKey!;
  await worker.waitFor(/Connected to/, { timeoutMs: 60_000 });
  t.diagnostic(`gateway and worker up at ${since(start)}`);

  // Sent in waves, as the per-IP burst limit (100, then 50 a second) admits them.
  const requests: Promise<Outcome>[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    if (i >= 100 && i % 25 === 0) await new Promise((r) => setTimeout(r, 500));
    requests.push(paidRequest(first.baseUrl, apiKey, i));
  }
  await whenSettled(requests, 30);
  worker.child.kill("SIGKILL");
  t.diagnostic(`worker killed at ${since(start)}`);
  await whenSettled(requests, 60);
  first.child.kill("SIGKILL");
  t.diagnostic(`gateway killed at ${since(start)}`);
  await exited(first.child);
  const outcomes = await Promise.all(requests);
  const answered = outcomes.flatMap((o) => (o.kind === "answered" ? [o.jobId] : []));
  const count = (kind: Outcome["kind"]) => outcomes.filter((o) => o.kind === kind).length;
  t.diagnostic(`${answered.length} answered in full, ${count("refused")} refused, ${count("cut")} cut off by the kills`);
  assert.ok(answered.length >= 20, "some requests completed before the kills");
  assert.ok(count("cut") >= 1, "some requests were in flight when the gateway died");

  // Restart on the same data directory and port; recovery runs before it listens.
  const second = await startDev(dir.path, ["--port", port, ...seed]);
  t.diagnostic(`gateway restarted at ${since(start)}`);
  const auth = { authorization: `Bearer ${apiKey}` };
  const reply = await fetch(`${second.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], temperature: 0, max_tokens: 4 }),
  });
  assert.equal(reply.status, 200, "the restarted gateway serves");
  answered.push(reply.headers.get("x-svc-job-id")!);
  await reply.text();
  second.child.kill("SIGINT");
  assert.equal(await exited(second.child), 0);

  t.diagnostic(`gateway stopped at ${since(start)}`);
  const db = await openDb({ dataDir: dir.path });
  const chain = await openChain({ dataDir: dir.path });
  try {
    const wallet = (await loadOrCreateKeypair(join(dir.path, "keys"), "dev-wallet")).address;
    const open = await db.query("SELECT id, status FROM jobs WHERE status IN ('pending', 'processing', 'settling')");
    assert.deepEqual(open, [], "no job left open");
    const jobs = await db.query<{ id: string; status: string; credits_charged: number; failure_reason: string | null }>("SELECT id, status, credits_charged, failure_reason FROM jobs WHERE wallet = $1", [wallet]);
    const byId = new Map(jobs.map((j) => [j.id, j]));
    // An escrow table's job is answered before its worker signs its batch: one whose worker or
    // gateway was killed first is refunded instead (its worker unpaid), never charged without a settlement.
    const refundedUnsigned = (job: { status: string; credits_charged: number; failure_reason: string | null }) =>
      job.status === "failed" && job.credits_charged === 0 && ["settlement_unsigned", "interrupted"].includes(job.failure_reason ?? "");
    for (const id of answered) {
      const job = byId.get(id);
      assert.ok(job && ((job.status === "settled" && job.credits_charged > 0) || refundedUnsigned(job)), `answered job ${id} was charged once settled, or refunded unsigned: ${JSON.stringify(job)}`);
    }
    const charged = jobs.reduce((sum, j) => sum + j.credits_charged, 0);
    const credits = await money.availableCredits(db, wallet);
    assert.equal(credits, CREDITS - charged, "the wallet holds what it had less what its jobs charged");
    assert.equal(await chain.creditBalance(wallet), creditsToBaseUnits(credits), "the chain agrees with the ledger");
    assert.deepEqual(await checkInvariants(db), []);
    assert.deepEqual(await checkJobInvariants(db), []);
    t.diagnostic(`${jobs.length} jobs, ${jobs.filter((j) => j.credits_charged > 0).length} charged ${charged} credits in total`);
  } finally {
    await chain.close();
    await db.close();
  }
});
