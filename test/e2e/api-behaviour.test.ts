/**
 * What a user of the API expects around the completions themselves: sequential requests spread
 * over idle workers, GET /models says the context a request can actually get, a failed job's
 * x-svc-credits-remaining is the balance after its refund, GET /jobs pages both ways without
 * repeats or gaps, and the health endpoints answer without a key and outside the burst limit.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { generateKeypair } from "../../src/core/keys.ts";
import { silentLogger } from "../../src/core/logger.ts";
import { checkReadiness } from "../../src/http/routes/health.ts";
import { LlamaEngine } from "../../src/inference/llama-engine.ts";
import { ensureWiringModel } from "../../src/inference/wiring-model.ts";
import * as money from "../../src/jobs/money.ts";
import type { WorkerClient } from "../../src/worker/worker-client.ts";
import { WorkerNode } from "../../src/worker/worker-node.ts";
import { FailingWorker } from "../support/failing-worker.ts";
import { attachProtocolWorker } from "../support/protocol-worker.ts";
import { MODEL, migratedTestDb, startTestGateway, tempDir, testEngine, testWorker, type TestGateway } from "../support/service.ts";

/** A 32K catalog model, served here by the wiring model's engine (2,048 tokens or fewer). */
const LARGE_MODEL = "Qwen/Qwen3-1.7B";
const hi = [{ role: "user" as const, content: "Hi" }];

let gateway: TestGateway;
const clients: WorkerClient[] = [];
const dir = await tempDir("svc-api-");
let smallEngine: LlamaEngine | undefined;

before(async () => {
  // No random audits: one re-runs a job on the other worker and so takes its turn (1 in 100 jobs).
  gateway = await startTestGateway({ db: await migratedTestDb(), workers: [await testWorker(), await testWorker()], credits: 1000, disputes: { auditShare: 0 } });
});
after(async () => {
  for (const client of clients) await client.close();
  await gateway?.close();
  await smallEngine?.close();
  await dir.remove();
});

async function get<T>(path: string, auth = true): Promise<{ status: number; headers: Headers; body: T }> {
  const res = await fetch(path.startsWith("/") ? `${gateway.service.origin}${path}` : `${gateway.baseUrl}/${path}`, {
    headers: auth ? { authorization: `Bearer ${gateway.apiKey}` } : {},
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as T };
}

interface Model {
  id: string;
  svc: { context_window: number; active_workers: number };
}

test("twenty requests one after another are shared evenly by two idle workers", async () => {
  const served = new Map<string, number>();
  for (let i = 0; i < 20; i++) {
    const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 1 }).withResponse();
    const worker = response.headers.get("x-svc-worker")!;
    served.set(worker, (served.get(worker) ?? 0) + 1);
    // One after another: the reply can come before its settlement confirms and frees the worker.
    while (gateway.service.pool.outstanding(worker) > 0) await new Promise((r) => setTimeout(r, 5));
  }
  assert.deepEqual([...served.values()], [10, 10]);
});

describe("GET /models says the context a request can get", () => {
  test("a 32K catalog model whose only worker holds 2,048 tokens shows 2,048, which is what is enforced", async () => {
    clients.push(await attachProtocolWorker(gateway.service, { engines: new Map([[LARGE_MODEL, await testEngine()]]) }));
    assert.equal(gateway.service.catalog.get(LARGE_MODEL)?.contextWindow, 32_768);
    const listed = (await get<{ data: Model[] }>("models")).body.data.find((m) => m.id === LARGE_MODEL);
    assert.equal(listed?.svc.context_window, 2048);
    const one = await get<Model>(`models/${encodeURIComponent(LARGE_MODEL)}`);
    assert.equal(one.body.svc.context_window, 2048);

    // One token past the window is refused; the window itself is served.
    const prompt = (await gateway.client.chat.completions.create({ model: LARGE_MODEL, messages: hi, max_tokens: 1 })).usage!.prompt_tokens;
    await assert.rejects(gateway.client.chat.completions.create({ model: LARGE_MODEL, messages: hi, max_tokens: 2048 - prompt + 1 }), (e: unknown) => {
      return e instanceof OpenAI.BadRequestError && e.code === "context_length_exceeded" && /2048 tokens/.test(e.message);
    });
    const fits = await gateway.client.chat.completions.create({ model: LARGE_MODEL, messages: hi, max_tokens: 2048 - prompt });
    assert.equal(fits.choices[0]!.finish_reason, "stop");
  });

  test("with a smaller worker too, the largest window shows, and a request needing it goes to the worker that holds it", async () => {
    smallEngine = await LlamaEngine.load({ modelPath: await ensureWiringModel(dir.path), threads: 1, maxSequences: 2, contextSize: 1024 });
    const small = await attachProtocolWorker(gateway.service, { engines: new Map([[LARGE_MODEL, smallEngine]]) });
    clients.push(small);
    const listed = (await get<{ data: Model[] }>("models")).body.data.find((m) => m.id === LARGE_MODEL);
    assert.equal(listed?.svc.active_workers, 2);
    assert.equal(listed?.svc.context_window, 2048);
    // Idle workers take turns, so the small one (never used yet) is the first pick for each of these.
    const { response } = await gateway.client.chat.completions.create({ model: LARGE_MODEL, messages: hi, max_tokens: 1500 }).withResponse();
    assert.notEqual(response.headers.get("x-svc-worker"), small.address, "1,500 tokens do not fit the 1,024-token worker");
    const { response: short } = await gateway.client.chat.completions.create({ model: LARGE_MODEL, messages: hi, max_tokens: 5 }).withResponse();
    assert.equal(short.headers.get("x-svc-worker"), small.address, "a short request still goes to the small worker");
  });
});

test("a failed job's x-svc-credits-remaining is the balance after its refund", async () => {
  // A worker whose engine crashes before its first token, as the only one serving this model.
  const crashModel = "meta-llama/Llama-3.2-3B-Instruct";
  const failing = new FailingWorker(new WorkerNode(generateKeypair(), new Map([[crashModel, await testEngine()]])));
  gateway.service.trust.vouch(failing.address);
  gateway.service.pool.add(failing);
  const balance = await money.availableCredits(gateway.service.db, gateway.wallet);
  await assert.rejects(gateway.client.chat.completions.create({ model: crashModel, messages: hi, max_tokens: 5 }), (e: unknown) => {
    assert.ok(e instanceof OpenAI.InternalServerError);
    assert.ok(e.headers?.get("x-svc-job-id"));
    assert.equal(e.headers?.get("x-svc-credits-remaining"), String(balance), "not the balance at lock time");
    return true;
  });
  assert.equal(await money.availableCredits(gateway.service.db, gateway.wallet), balance);
});

describe("paging through 25 jobs with limit 10", () => {
  interface Page {
    data: { id: string }[];
    has_more: boolean;
    next_cursor: string | null;
  }
  let apiKey = "";
  /** The 25 jobs' ids, oldest first. */
  let ids: string[] = [];

  async function page(query: string): Promise<Page> {
    const res = await fetch(`${gateway.baseUrl}/jobs?${query}`, { headers: { authorization: `Bearer ${apiKey}` } });
    assert.equal(res.status, 200);
    return (await res.json()) as Page;
  }

  /** Follows next_cursor from `first` until it is null; returns every page's ids. */
  async function follow(first: string, direction: "before" | "after"): Promise<string[][]> {
    const pages: string[][] = [];
    let current = await page(first);
    for (;;) {
      pages.push(current.data.map((j) => j.id));
      assert.equal(current.next_cursor === null, !current.has_more, "a cursor exactly when there is more");
      if (current.next_cursor === null) return pages;
      assert.ok(pages.length < 10, "paging ends");
      current = await page(`limit=10&${direction}=${current.next_cursor}`);
    }
  }

  before(async () => {
    const caller = await gateway.newAccount(1000);
    apiKey = caller.apiKey;
    await Promise.all(Array.from({ length: 25 }, () => caller.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 1 })));
    ids = (await page("limit=100")).data.map((j) => j.id).reverse();
    assert.equal(ids.length, 25);
  });

  test("back from the newest (the default direction): every job once, newest first", async () => {
    const pages = await follow("limit=10", "before");
    assert.deepEqual(pages.map((p) => p.length), [10, 10, 5]);
    assert.deepEqual(pages.flat(), [...ids].reverse());
  });

  test("forward from the oldest: every job once, each page newest first", async () => {
    // The oldest job is the cursor to start after; it is not part of what follows.
    const pages = await follow(`limit=10&after=${ids[0]}`, "after");
    assert.deepEqual(pages.map((p) => p.length), [10, 10, 4]);
    for (const pageIds of pages) assert.deepEqual(pageIds, [...pageIds].sort().reverse(), "newest first within a page");
    assert.deepEqual(pages.flatMap((p) => [...p].reverse()), ids.slice(1), "no repeats, no gaps");
  });

  test("a forward page's cursor is its newest job, and has_more says whether newer ones exist", async () => {
    const first = await page(`limit=10&after=${ids[4]}`);
    assert.deepEqual(first.data.map((j) => j.id), ids.slice(5, 15).reverse());
    assert.equal(first.has_more, true);
    assert.equal(first.next_cursor, ids[14]);
    const last = await page(`limit=10&after=${ids[14]}`);
    assert.deepEqual(last.data.map((j) => j.id), ids.slice(15).reverse());
    assert.equal(last.has_more, false);
    assert.equal(last.next_cursor, null);
  });
});

describe("health", () => {
  test("GET /healthz answers 200 without a key, and neither probe is rate limited", async () => {
    const live = await get<{ status: string }>("/healthz", false);
    assert.equal(live.status, 200);
    assert.deepEqual(live.body, { status: "ok" });
    // Twice the burst the per-IP limiter allows (100), at once: a load balancer is never refused.
    const probes = await Promise.all(Array.from({ length: 200 }, (_, i) => fetch(`${gateway.service.origin}${i % 2 ? "/healthz" : "/readyz"}`)));
    assert.deepEqual([...new Set(probes.map((r) => r.status))], [200]);
    await Promise.all(probes.map((r) => r.arrayBuffer()));
  });

  test("GET /readyz is 200 while the database, the chain and a worker answer, 503 naming what failed otherwise", async () => {
    const ready = await get<{ status: string; checks: Record<string, string> }>("/readyz", false);
    assert.equal(ready.status, 200);
    assert.deepEqual(ready.body, { status: "ready", checks: { database: "ok", chain: "ok", workers: "ok" } });

    const { pool } = gateway.service;
    for (const client of clients.splice(0)) await client.close();
    for (const model of pool.hostedModels()) for (const worker of pool.hosting(model)) pool.remove(worker.address);
    // Readiness is checked at most once a second; the gateway notices the closed connections meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    assert.equal(pool.size, 0);
    const notReady = await get<{ status: string; checks: Record<string, string> }>("/readyz", false);
    assert.equal(notReady.status, 503);
    assert.deepEqual(notReady.body, { status: "not_ready", checks: { database: "ok", chain: "ok", workers: "no worker connected that is sold to callers" } });
  });

  test("a database that fails and a chain that hangs are reported as such (simulated: neither fault can be caused on demand)", async () => {
    const started = Date.now();
    const readiness = await checkReadiness(
      { database: () => Promise.reject(new Error("connection refused")), chain: () => new Promise(() => undefined), workers: () => 1 },
      silentLogger(),
      200,
    );
    assert.deepEqual(readiness, { status: "not_ready", checks: { database: "unreachable", chain: "no answer within 200 ms", workers: "ok" } });
    assert.ok(Date.now() - started < 2_000, "a hung check does not hang the probe");
  });
});
