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

let gateway: TestGateway;
before(async () => {
  gateway = await startTestGateway({ metrics: { port: 0 } });
});
after(() => gateway.close());

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

test("only GET /metrics is served on the metrics port", async () => {
  const res = await fetch(gateway.service.metrics!.url.replace("/metrics", "/v1/models"));
  assert.equal(res.status, 404);
});
