/**
 * GET /metrics on its own port, scraped before and after paid requests made with the `openai` SDK
 * on a real gateway on loopback: the request counter and the time histogram move by exactly those
 * requests, as do the per-model counts, the gateway's added time, the jobs ended and the chain
 * sends of their locks and settlements with their fees; the ledger's gauges read what the ledger
 * says, the backlog gauges read the unfinished jobs (those awaiting their settlement batch too),
 * the workers are counted by model and standing, and no label carries a wallet, a key, a job id
 * or a caller's made-up model.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { SettlementRequest, WorkerEvent, WorkerJob } from "../../src/network/worker-handle.ts";
import { FUNDING_ACCOUNT, TREASURY_ACCOUNT, getAccount, walletAccountId, walletAddresses, workerAccountId } from "../../src/ledger/index.ts";
import { MODEL, startTestGateway, testWorker, type TestGateway } from "../support/service.ts";
import { jobConcluded, until } from "../support/eventually.ts";
import { testCert } from "../support/tls-cert.ts";
import { startReceiver, type Receiver } from "../support/webhook-receiver.ts";
import { WrappedWorker } from "../support/wrapped-worker.ts";

/** A real worker whose settlement signatures wait while `hold` is set (its jobs wait for their batch), and that fails its runs while `failing`. */
class GatedWorker extends WrappedWorker {
  hold: Promise<void> | undefined;
  failing = false;
  run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent> {
    return this.failing ? brokenRun() : this.real.run(job, signal);
  }
  override async signSettlement(request: SettlementRequest) {
    await this.hold;
    return super.signSettlement(request);
  }
}

async function* brokenRun(): AsyncIterable<WorkerEvent> {
  throw new Error("the worker broke down before its first token");
}

const SECRET = "a-secret-of-20-chars-or-more";
let gateway: TestGateway;
let receiver: Receiver;
let worker: GatedWorker;
before(async () => {
  receiver = await startReceiver(SECRET);
  const webhooks = { allowLoopback: true, trustedCa: (await testCert()).cert, timeScale: 0.0003, deliveryTimeoutMs: 2_000 };
  worker = new GatedWorker(await testWorker());
  gateway = await startTestGateway({ metrics: { port: 0 }, webhooks, workers: [worker] });
});
after(async () => {
  await gateway.close();
  await receiver.close();
});

async function scrape(): Promise<string> {
  const res = await fetch(gateway.service.metrics!.url);
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type") ?? "", /text\/plain/);
  return res.text();
}

/** The value of one sample, or 0 when the series is not there yet. */
function sample(text: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    const labelText = line.slice(name.length).split(" ")[0]!;
    if (wanted.every((w) => labelText.includes(w))) return Number(line.split(" ").at(-1));
  }
  return 0;
}

const COMPLETIONS = { route: "/v1/chat/completions", method: "POST", status: "200" };

test("three paid completions move the request counter and the time histogram by exactly three", async () => {
  const before = await scrape();
  const ids: string[] = [];
  for (let i = 0; i < 3; i++) {
    const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `Hi ${i}` }], max_tokens: 4 }).withResponse();
    ids.push(response.headers.get("x-svc-job-id")!);
  }
  for (const id of ids) await jobConcluded(gateway.service, id);
  const after = await scrape();
  assert.equal(sample(after, "svc_http_requests_total", COMPLETIONS) - sample(before, "svc_http_requests_total", COMPLETIONS), 3);
  const count = (text: string) => sample(text, "svc_http_request_duration_seconds_count", { route: COMPLETIONS.route, status: "200" });
  assert.equal(count(after) - count(before), 3);
  const sends = (text: string, kind: string) => sample(text, "svc_chain_sends_total", { kind, outcome: "landed" });
  assert.equal(sends(after, "settlement") - sends(before, "settlement"), 3, "one settlement sent and landed a job");
  assert.equal(sends(after, "escrow") - sends(before, "escrow"), 3, "one escrow lock a job (several may share a transaction)");
  assert.equal(sample(after, "svc_jobs_unfinished", { status: "settling" }), 0, "every job settled");
  assert.equal(sample(after, "svc_jobs_unfinished_oldest_age_seconds"), 0);
  assert.equal(sample(after, "svc_workers", { model: MODEL, standing: "good" }), 1);
  assert.ok(sample(after, "nodejs_eventloop_lag_seconds") >= 0 && after.includes("process_resident_memory_bytes"));
});

test("a route is counted by its pattern: ids, wallets and keys never become labels", async () => {
  const missing = "job_01J00000000000000000000000";
  const res = await fetch(`${gateway.baseUrl}/jobs/${missing}`, { headers: { authorization: `Bearer ${gateway.apiKey}` } });
  assert.equal(res.status, 404);
  const text = await scrape();
  assert.equal(sample(text, "svc_http_requests_total", { route: "/v1/jobs/:id", method: "GET", status: "404" }), 1);
  for (const secret of [missing, gateway.wallet, gateway.apiKey]) assert.equal(text.includes(secret), false, `${secret.slice(0, 12)}... in a label`);
});

test("webhook attempts are counted by outcome, and the database is seen answering", async () => {
  const before = await scrape();
  receiver.script("/refusing", (_, nth) => (nth === 1 ? 500 : 200));
  for (const path of ["/ok", "/refusing"]) {
    const res = await fetch(`${gateway.baseUrl}/webhooks`, {
      method: "POST",
      headers: { authorization: `Bearer ${gateway.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ url: `${receiver.origin}${path}`, events: ["job.completed"], secret: SECRET }),
    });
    assert.equal(res.status, 200, await res.text());
  }
  const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }).withResponse();
  await jobConcluded(gateway.service, response.headers.get("x-svc-job-id")!);
  await receiver.waitFor("/ok", 1);
  await receiver.waitFor("/refusing", 2);
  const after = await scrape();
  const attempts = (text: string, outcome: string) => sample(text, "svc_webhook_deliveries_total", { outcome });
  assert.equal(attempts(after, "delivered") - attempts(before, "delivered"), 2, "one to /ok, the retry to /refusing");
  assert.equal(attempts(after, "retrying") - attempts(before, "retrying"), 1, "the 500 of /refusing's first attempt");
  assert.equal(sample(after, "svc_database_up"), 1);
  assert.ok(sample(after, "svc_database_query_seconds") > 0);
});

test("only GET /metrics is served on the metrics port", async () => {
  const res = await fetch(gateway.service.metrics!.url.replace("/metrics", "/v1/models"));
  assert.equal(res.status, 404);
});

/** Base units in a credit (core/units.ts). */
const UNITS_PER_CREDIT = 10_000;

/** The sum of a metric's samples whose labels include `labels`. */
function total(text: string, name: string, labels: Record<string, string> = {}): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  return text
    .split("\n")
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .filter((line) => wanted.every((w) => line.slice(name.length).split(" ")[0]!.includes(w)))
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
}

test("paid requests are counted by model and stream, and each completion's added time once", async () => {
  const before = await scrape();
  const ids: string[] = [];
  for (let i = 0; i < 2; i++) {
    const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `Hi ${i}` }], max_tokens: 4 }).withResponse();
    ids.push(response.headers.get("x-svc-job-id")!);
    const { data: stream, response: streamed } = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: `Yo ${i}` }], max_tokens: 4, stream: true }).withResponse();
    for await (const chunk of stream) assert.equal(chunk.object, "chat.completion.chunk");
    ids.push(streamed.headers.get("x-svc-job-id")!);
  }
  const madeUp = "caller-made/up-model-4f2a";
  const refused = await gateway.client.chat.completions.create({ model: madeUp, messages: [{ role: "user", content: "Hi" }] }).then(() => 200, (error: { status: number }) => error.status);
  assert.ok(refused >= 400 && refused < 500, "model_not_found");
  const jobs = await Promise.all(ids.map((id) => jobConcluded(gateway.service, id)));
  const after = await scrape();
  const moved = (name: string, labels: Record<string, string>) => total(after, name, labels) - total(before, name, labels);
  for (const stream of ["false", "true"]) {
    const labels = { model: MODEL, status: "200", stream };
    assert.equal(moved("svc_paid_requests_total", labels), 2, `stream=${stream}`);
    assert.equal(moved("svc_paid_request_duration_seconds_count", labels), 2);
    assert.equal(moved("svc_gateway_added_seconds_count", { stream }), 2, "one added time per completed completion");
    const addedS = moved("svc_gateway_added_seconds_sum", { stream });
    assert.ok(addedS > 0 && addedS < moved("svc_paid_request_duration_seconds_sum", labels), `the gateway's share (${addedS} s) is part of the requests' time`);
  }
  assert.equal(moved("svc_gateway_first_token_added_seconds_count", {}), 2, "one per stream");
  assert.equal(moved("svc_paid_requests_total", { model: "unknown", status: String(refused), stream: "false" }), 1);
  assert.equal(after.includes(madeUp), false, "a caller's model id never becomes a label");
  assert.equal(moved("svc_jobs_ended_total", { status: "settled" }), 4);
  assert.equal(moved("svc_jobs_ended_total", { status: "failed" }) + moved("svc_jobs_ended_total", { status: "refunded" }), 0);
  // Every transaction these jobs landed, each once (locks and settlements may share one).
  const signatures = new Set(jobs.flatMap((job) => [job.escrowTx!, job.settlementTx!]));
  let fees = 0n;
  for (const signature of signatures) fees += BigInt((await gateway.service.chain.backend.getTransaction(signature))!.meta!.fee);
  const feesMoved = moved("svc_chain_fees_lamports_total", {});
  assert.ok(feesMoved > 0);
  assert.equal(feesMoved, Number(fees), "the fees counter moved by the fees the chain recorded for those transactions");
  assert.ok(moved("svc_chain_fees_lamports_total", { kind: "escrow" }) > 0 && moved("svc_chain_fees_lamports_total", { kind: "settlement" }) > 0);
});

test("the ledger's gauges read what the ledger's own accounts say", async () => {
  const { db } = gateway.service;
  const before = await scrape();
  const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }).withResponse();
  await jobConcluded(gateway.service, response.headers.get("x-svc-job-id")!);
  const text = await scrape();
  const gauge = (name: string) => sample(text, "svc_ledger_credits", { total: name });
  let available = 0n;
  for (const wallet of await walletAddresses(db)) available += (await getAccount(db, walletAccountId(wallet)))!.available;
  const funding = (await getAccount(db, FUNDING_ACCOUNT))!;
  const treasury = (await getAccount(db, TREASURY_ACCOUNT))!;
  const paid = (await getAccount(db, workerAccountId(worker.address)))!;
  assert.equal(gauge("wallets_available"), Number(available) / UNITS_PER_CREDIT);
  assert.equal(gauge("deposited"), Number(funding.debitsPosted) / UNITS_PER_CREDIT);
  assert.equal(gauge("withdrawn"), Number(funding.creditsPosted) / UNITS_PER_CREDIT);
  assert.equal(gauge("treasury"), Number(treasury.balance) / UNITS_PER_CREDIT);
  assert.equal(gauge("workers_paid"), Number(paid.creditsPosted) / UNITS_PER_CREDIT);
  assert.ok(gauge("workers_paid") > sample(before, "svc_ledger_credits", { total: "workers_paid" }), "the job paid its worker");
  for (const name of ["escrow_locked", "escrow_charged", "wallets_held", "withdrawing", "refunded"]) assert.equal(gauge(name), 0, `${name}: nothing open, nothing returned`);
});

test("a job whose settlement waits for its batch counts in the settlement backlog until it settles", async () => {
  let release!: () => void;
  worker.hold = new Promise((resolve) => (release = resolve));
  try {
    const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }).withResponse();
    const waiting = await scrape();
    assert.equal(sample(waiting, "svc_jobs_unfinished", { status: "settling" }), 1, "answered, its batch not signed yet");
    assert.ok(sample(waiting, "svc_jobs_unfinished_oldest_age_seconds") > 0);
    release();
    await jobConcluded(gateway.service, response.headers.get("x-svc-job-id")!);
  } finally {
    worker.hold = undefined;
    release();
  }
  const settled = await scrape();
  assert.equal(sample(settled, "svc_jobs_unfinished", { status: "settling" }), 0);
  assert.equal(sample(settled, "svc_jobs_unfinished_oldest_age_seconds"), 0);
});

test("a job whose only worker fails is counted as ended failed, once its refund is recorded", async () => {
  const failed = async () => sample(await scrape(), "svc_jobs_ended_total", { status: "failed" });
  const before = await failed();
  worker.failing = true;
  try {
    const status = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 4 }).then(() => 200, (error: { status: number }) => error.status);
    assert.ok(status >= 500, `answered ${status}`);
  } finally {
    worker.failing = false;
  }
  assert.equal(await until(failed, (n) => n > before, "the failed job to be counted") - before, 1);
  assert.equal(sample(await scrape(), "svc_jobs_ended_total", { status: "refunded" }), 0, "refunded is the 120-second timeout's status");
});
