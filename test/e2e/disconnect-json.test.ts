/**
 * A caller of a non-streaming (JSON) completion who hangs up mid-generation pays for what was
 * generated, as a streaming one does (disconnect.test.ts), and the gateway does not answer it
 * with an error claiming nothing was charged: the request's log line tells what happened.
 */
import assert from "node:assert/strict";
import { Writable } from "node:stream";
import { after, before, test } from "node:test";
import { pino } from "pino";
import { completionCost, TIERS } from "../../src/core/pricing.ts";
import { TRIGGER_WORD } from "../../src/inference/wiring-model.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { assertChainAgrees } from "../support/chain-checks.ts";
import { until } from "../support/eventually.ts";
import { MODEL, migratedTestDb, startTestGateway, type TestGateway } from "../support/service.ts";

/** The looping reply would run to 1,900 tokens; the caller leaves long before. */
const MAX_TOKENS = 1900;

interface Job {
  id: string;
  status: string;
  credits_charged: number;
  usage: { completion_tokens: number };
  on_chain: { settlement_tx: string | null; refund_tx: string | null };
}

const logLines: Record<string, unknown>[] = [];
let gateway: TestGateway;

before(async () => {
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split("\n")) if (line.trim() !== "") logLines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  gateway = await startTestGateway({ db: await migratedTestDb(), credits: 100, logger: pino({ level: "info" }, sink) });
});
after(() => gateway?.close());

async function get<T>(path: string): Promise<T> {
  const res = await fetch(`${gateway.baseUrl}${path}`, { headers: { authorization: `Bearer ${gateway.apiKey}` } });
  assert.equal(res.status, 200);
  return (await res.json()) as T;
}

test("a JSON caller who leaves mid-generation is charged for the partial output and gets no 'nothing was charged' answer", async () => {
  const before = await money.availableCredits(gateway.service.db, gateway.wallet);
  const controller = new AbortController();
  const body = { model: MODEL, messages: [{ role: "user", content: `Say ${TRIGGER_WORD}` }], temperature: 0, max_tokens: MAX_TOKENS };
  const request = fetch(`${gateway.baseUrl}/chat/completions`, {
    method: "POST",
    headers: { authorization: `Bearer ${gateway.apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
    signal: controller.signal,
  }).then(
    () => "answered",
    () => "left",
  );
  // The reply's headers only come with the whole completion: find the job through the API, and
  // leave once its worker has been producing for a moment.
  const running = await until(() => get<{ data: Job[] }>("/jobs?limit=1"), (page) => page.data[0]?.status === "processing", "the job to run");
  const jobId = running.data[0]!.id;
  await new Promise((resolve) => setTimeout(resolve, 300));
  controller.abort();
  assert.equal(await request, "left");

  const job = await until(() => get<Job>(`/jobs/${jobId}`), (j) => j.status === "settled" || j.status === "failed", "the job to end");
  assert.equal(job.status, "settled");
  const generated = job.usage.completion_tokens;
  assert.ok(generated > 0 && generated < MAX_TOKENS, `${generated} tokens generated: some, not the whole reply`);
  const charged = completionCost(TIERS.lite, generated);
  assert.equal(job.credits_charged, charged);
  assert.ok(job.on_chain.settlement_tx);
  assert.equal(job.on_chain.refund_tx, null);
  const after = before - charged;
  assert.equal(await money.availableCredits(gateway.service.db, gateway.wallet), after);

  // The request's log line: no error status, the caller gone, and the balance after the charge.
  const line = await until(async () => logLines.find((l) => l.msg === "completion" && l.job_id === jobId), (l) => l !== undefined, "the request's log line");
  assert.equal(line!.status, null, `nothing answered: ${JSON.stringify(line)}`);
  assert.equal(line!.client_gone, true);
  assert.equal(line!.credits_remaining, after);
  assert.ok(!logLines.some((l) => JSON.stringify(l).includes("nothing was charged")), "no log line says nothing was charged");

  await assertChainAgrees(gateway.service, gateway.wallet);
  assert.deepEqual(await checkInvariants(gateway.service.db), []);
  assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
});
