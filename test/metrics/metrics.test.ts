/**
 * GET /metrics on its own port, scraped before and after paid requests made with the `openai` SDK
 * on a real gateway on loopback: the request counter and the time histogram move by exactly those
 * requests, as do the chain sends of their locks and settlements, the backlog gauges read the
 * unfinished jobs, the workers are counted by model and standing, and no label carries a wallet,
 * a key or a job id.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { MODEL, startTestGateway, type TestGateway } from "../support/service.ts";
import { jobConcluded } from "../support/eventually.ts";
import { testCert } from "../support/tls-cert.ts";
import { startReceiver, type Receiver } from "../support/webhook-receiver.ts";

const SECRET = "a-secret-of-20-chars-or-more";
let gateway: TestGateway;
let receiver: Receiver;
before(async () => {
  receiver = await startReceiver(SECRET);
  const webhooks = { allowLoopback: true, trustedCa: (await testCert()).cert, timeScale: 0.0003, deliveryTimeoutMs: 2_000 };
  gateway = await startTestGateway({ metrics: { port: 0 }, webhooks });
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
