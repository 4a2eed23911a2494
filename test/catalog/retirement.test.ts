/**
 * Models joining and leaving a running gateway through governance, seen by a caller: an approval
 * lists the model with no restart; an announced retirement shows its date and reason in the `svc`
 * extension of GET /models until the date comes; after it the model is refused with 400
 * `model_not_found` naming the date, is no longer listed, and its worker is given none of its
 * jobs; the job it ran before stays readable at GET /jobs/{id} and checks out with `svc verify`.
 * A re-approval brings it back, and a restart's seeding of the launch catalog undoes no retirement.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import OpenAI from "openai";
import { approveModel, LAUNCH_CATALOG, listGovernedModels, retireModel, type ModelApproval } from "../../src/catalog/index.ts";
import { startChainRpc, type ChainRpcServer } from "../../src/chain/index.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import type { WorkerEvent, WorkerJob } from "../../src/network/worker-handle.ts";
import { WorkerNode } from "../../src/worker/worker-node.ts";
import { startSvc } from "../cli/svc-process.ts";
import { jobConcluded, until } from "../support/eventually.ts";
import { migratedTestDb, startTestGateway, tempDir, testEngine, testWorker, type TestGateway } from "../support/service.ts";

const GOVERNED: ModelApproval = {
  id: "example-org/Governed-1B",
  ownedBy: "Example",
  tier: "lite",
  parameters: "1B",
  contextWindow: 2048,
  description: "A governed model, served here by the wiring model's engine",
};
const hi = [{ role: "user" as const, content: "Hi" }];

/** A real worker that counts the jobs it is given. */
class CountingWorker extends WorkerNode {
  runs = 0;
  override async *run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent> {
    this.runs++;
    yield* super.run(job, signal);
  }
}

interface ListedModel {
  id: string;
  created: number;
  svc: { retires_at: string | null; retirement_reason: string | null; active_workers: number; median_latency_ms: number };
}

let gateway: TestGateway;
let rpc: ChainRpcServer;
let worker: CountingWorker;

before(async () => {
  worker = new CountingWorker(generateKeypair(), new Map([[GOVERNED.id, await testEngine()]]));
  // Jobs with an escrow record of their own, which `svc verify` reads without a receipt.
  gateway = await startTestGateway({ db: await migratedTestDb(), workers: [await testWorker(), worker], credits: 100, escrowTables: false });
  rpc = await startChainRpc({ chain: gateway.service.chain, port: 0 });
});
after(async () => {
  await rpc?.close();
  await gateway?.close();
});

async function get<T>(path: string): Promise<{ status: number; body: T }> {
  const res = await fetch(`${gateway.baseUrl}${path}`, { headers: { authorization: `Bearer ${gateway.apiKey}` } });
  return { status: res.status, body: (await res.json()) as T };
}

const listed = async () => (await get<{ data: ListedModel[] }>("/models")).body.data.find((m) => m.id === GOVERNED.id);
const one = () => get<ListedModel & { error?: { code: string } }>(`/models/${encodeURIComponent(GOVERNED.id)}`);

test("a model joins, is announced for retirement, is refused after its date, and its settled job stays verifiable", async () => {
  const { db } = gateway.service;
  // Served by a connected worker, yet neither listed nor sold before governance approves it.
  assert.equal(await listed(), undefined);
  await assert.rejects(gateway.client.chat.completions.create({ model: GOVERNED.id, messages: hi }), { status: 400, code: "model_not_found" });

  await approveModel(db, GOVERNED);
  const joined = await until(listed, (m) => m !== undefined, "the approval to list the model");
  assert.equal(joined!.svc.retires_at, null);
  assert.equal(joined!.svc.retirement_reason, null);
  const { data, response } = await gateway.client.chat.completions.create({ model: GOVERNED.id, messages: hi }).withResponse();
  const jobId = response.headers.get("x-svc-job-id")!;
  await jobConcluded(gateway.service, jobId);
  assert.equal(worker.runs, 1);

  // Announced a few seconds ahead: listed with its date and reason, and still served until then.
  const retiresAt = new Date(Math.ceil((Date.now() + 3_000) / 1000) * 1000);
  await retireModel(db, GOVERNED.id, retiresAt, "superseded by example-org/Governed-2B");
  const announced = await until(listed, (m) => m?.svc.retires_at !== null, "the announcement to show");
  assert.equal(announced!.svc.retires_at, retiresAt.toISOString());
  assert.equal(announced!.svc.retirement_reason, "superseded by example-org/Governed-2B");
  assert.equal(announced!.created, joined!.created, "the contract's fields are unchanged");
  assert.equal((await one()).body.svc.retires_at, retiresAt.toISOString(), "GET /models/{id} says it too");
  await gateway.client.chat.completions.create({ model: GOVERNED.id, messages: hi });
  assert.equal(worker.runs, 2);

  await new Promise((resolve) => setTimeout(resolve, Math.max(0, retiresAt.getTime() - Date.now()) + 50));
  await assert.rejects(gateway.client.chat.completions.create({ model: GOVERNED.id, messages: hi }), (e: unknown) => {
    assert.ok(e instanceof OpenAI.BadRequestError, String(e));
    assert.equal(e.code, "model_not_found");
    assert.equal(e.param, "model");
    assert.match(e.message, new RegExp(`retired on ${retiresAt.toISOString().replace(/\./g, "\\.")} \\(superseded by example-org/Governed-2B\\)`));
    return true;
  });
  assert.equal(worker.runs, 2, "its worker, still connected, is given none of its jobs");
  assert.equal(await listed(), undefined, "no longer listed");
  assert.equal((await one()).status, 404);

  // The job it ran before: readable, listable by its model, and checked out from the chain.
  const job = await get<{ id: string; model: string; status: string }>(`/jobs/${jobId}`);
  assert.equal(job.status, 200);
  assert.equal(job.body.model, GOVERNED.id);
  assert.equal(job.body.status, "settled");
  const byModel = await get<{ data: { id: string }[] }>(`/jobs?model=${encodeURIComponent(GOVERNED.id)}`);
  assert.equal(byModel.status, 200);
  assert.ok(byModel.body.data.some((j) => j.id === jobId));
  const verify = startSvc(["verify", jobId, "--base-url", gateway.baseUrl, "--rpc", rpc.url], { SVC_API_KEY: gateway.apiKey });
  const { code } = await verify.exited();
  assert.equal(code, 0, verify.stdout() + verify.stderr());
  assert.match(verify.stdout(), /status {10}settled/);
  assert.ok(data.choices[0]!.message.content);

  // Re-approved: listed again, no retirement, served.
  await approveModel(db, GOVERNED);
  const back = await until(listed, (m) => m !== undefined, "the re-approval to list the model");
  assert.equal(back!.svc.retires_at, null);
  await gateway.client.chat.completions.create({ model: GOVERNED.id, messages: hi });
  assert.equal(worker.runs, 3);
});

test("a restart seeds the launch catalog again without undoing an operator's retirements", async (t) => {
  const dir = await tempDir("svc-governance-restart-");
  t.after(() => dir.remove());
  const first = await startTestGateway({ dataDir: dir.path, credits: 0 });
  const announcedAt = new Date("2099-01-01T00:00:00Z");
  try {
    await retireModel(first.service.db, "Qwen/Qwen3-8B", new Date(Date.now() - 1000), "retired by vote");
    await retireModel(first.service.db, "Qwen/Qwen3-1.7B", announcedAt, "to be superseded");
  } finally {
    await first.close();
  }
  const again = await startTestGateway({ dataDir: dir.path, credits: 10 });
  try {
    const { catalog, db } = again.service;
    assert.equal(catalog.get("Qwen/Qwen3-8B"), undefined, "still retired after the restart's seed");
    assert.equal(catalog.retirement("Qwen/Qwen3-1.7B")?.retiresAt.toISOString(), announcedAt.toISOString(), "still announced");
    assert.ok(catalog.get("Qwen/Qwen3-1.7B"), "and served until its date");
    assert.equal((await listGovernedModels(db)).length, LAUNCH_CATALOG.length, "no launch model approved twice");
    await assert.rejects(again.client.chat.completions.create({ model: "Qwen/Qwen3-8B", messages: hi }), { status: 400, code: "model_not_found" });
  } finally {
    await again.close();
  }
});
