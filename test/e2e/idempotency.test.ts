/**
 * `Idempotency-Key` end to end on the real gateway, engine and chain: the `openai` SDK's own
 * retries past a lost answer are one job and one charge with a key (and two without one), two
 * concurrent requests with one key are one job, another body under the key is refused, a key
 * past 24 hours names a new request (its stored time moved back in the database), a stream is
 * replayed with the same text, a refusal before any job is not stored, a job that failed after
 * admission answers its error again, a first request whose node stopped before it answered is
 * settled by its job once that job ended (run anew when nothing was charged, told the answer was
 * lost when it was), and a dispute or a webhook created with a key is created once.
 */
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { outputHash } from "../../src/core/proof.ts";
import { requestFingerprint, UNANSWERED_AFTER_MS } from "../../src/idempotency/index.ts";
import { KNOWN_REPLY } from "../../src/inference/wiring-model.ts";
import { startDroppingProxy } from "../support/dropping-proxy.ts";
import { FailingWorker } from "../support/failing-worker.ts";
import { jobConcluded } from "../support/eventually.ts";
import { MODEL, migratedTestDb, startTestGateway, testWorker, type TestGateway } from "../support/service.ts";
import { minusMs } from "../../src/store/index.ts";

const hi = [{ role: "user" as const, content: "Hi" }];
const REPLAYED = "idempotent-replayed";

let gateway: TestGateway;
before(async () => {
  // A retry waits 2 s for a first request still running (30 s by default), so the test of that wait is short.
  gateway = await startTestGateway({ db: await migratedTestDb(), credits: 100, rateLimit: false, webhooks: { allowLoopback: true }, idempotencyWaitMs: 2_000 });
});
after(() => gateway.close());

interface Answer {
  status: number;
  headers: Headers;
  body: Record<string, unknown>;
}

async function post(path: string, apiKey: string, body: unknown, key?: string): Promise<Answer> {
  const res = await fetch(`${gateway.baseUrl}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json", ...(key !== undefined ? { "idempotency-key": key } : {}) },
    body: JSON.stringify(body),
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as Record<string, unknown> };
}

async function get<T>(path: string, apiKey: string): Promise<T> {
  return (await (await fetch(`${gateway.baseUrl}${path}`, { headers: { authorization: `Bearer ${apiKey}` } })).json()) as T;
}

const jobIds = async (apiKey: string) => (await get<{ data: { id: string }[] }>("/jobs", apiKey)).data.map((j) => j.id);
const credits = async (apiKey: string) => (await get<{ credits_remaining: number }>("/account", apiKey)).credits_remaining;
const errorOf = (answer: Answer) => answer.body.error as { code: string; type: string; param: string | null; docs: string };

/** What the wallet's jobs were charged, once each has concluded. */
async function charged(ids: string[]): Promise<number> {
  let total = 0;
  for (const id of ids) total += (await jobConcluded(gateway.service, id)).creditsCharged;
  return total;
}

describe("the openai SDK's own retries past a lost answer", () => {
  test("with an Idempotency-Key in headers: one job, one charge, and the caller gets the answer", async () => {
    const account = await gateway.newAccount(100);
    const proxy = await startDroppingProxy(gateway.service.origin);
    try {
      const client = new OpenAI({ apiKey: account.apiKey, baseURL: `${proxy.origin}/v1`, maxRetries: 2 });
      const key = `retry-${randomUUID()}`;
      const { data, response } = await client.chat.completions.create({ model: MODEL, messages: hi, temperature: 0 }, { headers: { "Idempotency-Key": key } }).withResponse();
      assert.equal(proxy.dropped, 1, "the first answer was lost after the service sent it");
      assert.deepEqual(proxy.requests.map((r) => r["idempotency-key"]), [key, key], "the SDK sent the key given in headers again on its retry");
      assert.equal(data.choices[0]!.message.content, KNOWN_REPLY);
      assert.equal(response.headers.get(REPLAYED), "true");
      const ids = await jobIds(account.apiKey);
      assert.equal(ids.length, 1, "one job");
      assert.equal(data.id, `chatcmpl-${ids[0]}`);
      assert.equal(response.headers.get("x-svc-job-id"), ids[0]);
      const cost = await charged(ids);
      assert.ok(cost > 0);
      assert.equal(await credits(account.apiKey), 100 - cost, "one charge");
      assert.equal(Number(response.headers.get("x-svc-credits-remaining")), 100 - cost);
    } finally {
      await proxy.close();
    }
  });

  test("without a key (the SDK adds none of its own): the retry is a second job and a second charge", async () => {
    const account = await gateway.newAccount(100);
    const proxy = await startDroppingProxy(gateway.service.origin);
    try {
      const client = new OpenAI({ apiKey: account.apiKey, baseURL: `${proxy.origin}/v1`, maxRetries: 2 });
      const { response } = await client.chat.completions.create({ model: MODEL, messages: hi, temperature: 0 }).withResponse();
      assert.deepEqual(proxy.requests.map((r) => r["idempotency-key"]), [undefined, undefined]);
      assert.equal(response.headers.get(REPLAYED), null);
      const ids = await jobIds(account.apiKey);
      assert.equal(ids.length, 2);
      assert.equal(await credits(account.apiKey), 100 - (await charged(ids)));
    } finally {
      await proxy.close();
    }
  });
});

describe("completions with a key", () => {
  test("two concurrent requests with one key: one job, both get its answer", async () => {
    const account = await gateway.newAccount(100);
    const key = randomUUID();
    const body = { model: MODEL, messages: hi, temperature: 0 };
    const answers = await Promise.all([post("/chat/completions", account.apiKey, body, key), post("/chat/completions", account.apiKey, body, key)]);
    assert.deepEqual(answers.map((a) => a.status), [200, 200]);
    assert.deepEqual(answers[0]!.body, answers[1]!.body);
    assert.deepEqual(answers.map((a) => a.headers.get(REPLAYED)).sort(), ["true", null].sort());
    const ids = await jobIds(account.apiKey);
    assert.deepEqual(ids, [answers[0]!.headers.get("x-svc-job-id")]);
    for (const name of ["x-svc-job-id", "x-svc-escrow-tx", "x-svc-worker", "x-svc-credits-remaining"]) {
      assert.equal(answers[0]!.headers.get(name), answers[1]!.headers.get(name), name);
    }
    assert.equal(await credits(account.apiKey), 100 - (await charged(ids)));
  });

  test("the same key with another body, or on another route: 422 idempotency_key_reused, nothing runs", async () => {
    const account = await gateway.newAccount(100);
    const key = randomUUID();
    assert.equal((await post("/chat/completions", account.apiKey, { model: MODEL, messages: hi, temperature: 0 }, key)).status, 200);
    // The same body in another key order and spacing is the same request.
    const same = await fetch(`${gateway.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { authorization: `Bearer ${account.apiKey}`, "content-type": "application/json", "idempotency-key": key },
      body: `{ "temperature": 0.0, "messages": [{ "content": "Hi", "role": "user" }], "model": "${MODEL}" }`,
    });
    assert.deepEqual([same.status, same.headers.get(REPLAYED)], [200, "true"]);
    const other = await post("/chat/completions", account.apiKey, { model: MODEL, messages: [{ role: "user", content: "Hello" }], temperature: 0 }, key);
    assert.equal(other.status, 422);
    assert.deepEqual(errorOf(other), { ...errorOf(other), code: "idempotency_key_reused", type: "invalid_request_error", param: "idempotency-key" });
    assert.match(errorOf(other).docs, /\/docs\/errors#idempotency_key_reused$/);
    const elsewhere = await post("/webhooks", account.apiKey, { url: "https://127.0.0.1:9/hook", events: ["job.completed"], secret: "a-secret-of-20-chars" }, key);
    assert.equal(errorOf(elsewhere).code, "idempotency_key_reused");
    assert.equal((await jobIds(account.apiKey)).length, 1);
  });

  test("a key longer than 255 characters is 400; 255 is accepted", async () => {
    const account = await gateway.newAccount(100);
    const body = { model: MODEL, messages: hi, temperature: 0 };
    const long = await post("/chat/completions", account.apiKey, body, "k".repeat(256));
    assert.deepEqual([long.status, errorOf(long).code, errorOf(long).param], [400, "invalid_request", "idempotency-key"]);
    assert.equal((await jobIds(account.apiKey)).length, 0);
    assert.equal((await post("/chat/completions", account.apiKey, body, "k".repeat(255))).status, 200);
  });

  test("keys are per wallet: two wallets' requests under one key string are two jobs", async () => {
    const [a, b] = [await gateway.newAccount(100), await gateway.newAccount(100)];
    const key = randomUUID();
    const answers = [await post("/chat/completions", a.apiKey, { model: MODEL, messages: hi }, key), await post("/chat/completions", b.apiKey, { model: MODEL, messages: [{ role: "user", content: "Other" }] }, key)];
    assert.deepEqual(answers.map((x) => [x.status, x.headers.get(REPLAYED)]), [[200, null], [200, null]]);
    assert.equal((await jobIds(a.apiKey)).length + (await jobIds(b.apiKey)).length, 2);
  });

  test("a key reused after 24 hours is a new request", async () => {
    const account = await gateway.newAccount(100);
    const key = randomUUID();
    const body = { model: MODEL, messages: hi, temperature: 0 };
    const first = await post("/chat/completions", account.apiKey, body, key);
    assert.equal((await post("/chat/completions", account.apiKey, body, key)).headers.get(REPLAYED), "true");
    // A day passes for this key: its stored time, the database's clock every node shares, moved back.
    const db = gateway.service.db;
    await db.query(`UPDATE idempotency_keys SET created_at = ${minusMs(db, "created_at", "$3::float8")} WHERE wallet = $1 AND key = $2`, [account.wallet, key, 24 * 3600_000 + 1_000]);
    const later = await post("/chat/completions", account.apiKey, body, key);
    assert.equal(later.status, 200);
    assert.equal(later.headers.get(REPLAYED), null);
    assert.notEqual(later.body.id, first.body.id);
    const ids = await jobIds(account.apiKey);
    assert.equal(ids.length, 2);
    assert.equal(await credits(account.apiKey), 100 - (await charged(ids)));
  });

  test("a replayed stream gives the same text, chunks and usage, marked by the replay header", async () => {
    const account = await gateway.newAccount(100);
    const key = randomUUID();
    const stream = async () => {
      const { data, response } = await account.client.chat.completions
        .create({ model: MODEL, messages: hi, temperature: 0, stream: true, stream_options: { include_usage: true } }, { headers: { "Idempotency-Key": key } })
        .withResponse();
      let text = "";
      const ids = new Set<string>();
      let usage: unknown;
      let finish: string | null = null;
      for await (const chunk of data) {
        ids.add(chunk.id);
        text += chunk.choices[0]?.delta.content ?? "";
        finish = chunk.choices[0]?.finish_reason ?? finish;
        if (chunk.usage) usage = chunk.usage;
      }
      return { text, ids: [...ids], usage, finish, replayed: response.headers.get(REPLAYED), jobId: response.headers.get("x-svc-job-id") };
    };
    const first = await stream();
    const again = await stream();
    assert.equal(first.text, KNOWN_REPLY);
    assert.deepEqual({ ...again, replayed: null }, first);
    assert.deepEqual([first.replayed, again.replayed], [null, "true"]);
    assert.deepEqual(await jobIds(account.apiKey), [first.jobId]);
  });

  test("a refusal before any job (402) stores nothing: after a top-up the retry runs", async () => {
    const account = await gateway.newAccount(0);
    const key = randomUUID();
    const body = { model: MODEL, messages: hi, temperature: 0 };
    const refused = await post("/chat/completions", account.apiKey, body, key);
    assert.deepEqual([refused.status, errorOf(refused).code], [402, "insufficient_credits"]);
    await gateway.service.deposits.deposit(account.wallet, 100);
    const paid = await post("/chat/completions", account.apiKey, body, key);
    assert.deepEqual([paid.status, paid.headers.get(REPLAYED)], [200, null]);
    assert.equal((await jobIds(account.apiKey)).length, 1);
  });
});

describe("a retry while the first request runs", () => {
  // The first request is stood in for by its row as a running request leaves it (claimed, its job
  // linked, no outcome yet): a real completion ends within milliseconds on the wiring model, too
  // soon to hold a key for 30 seconds.
  async function running(wallet: string, key: string, body: unknown, jobId: string) {
    const fingerprint = requestFingerprint("POST", "/v1/chat/completions", body);
    await gateway.service.db.query("INSERT INTO idempotency_keys (wallet, key, fingerprint, claim, job_id, created_at, updated_at) VALUES ($1, $2, $3, 'first', $4, now(), now())", [
      wallet,
      key,
      fingerprint,
      jobId,
    ]);
  }

  test("waits for the first request's outcome, then answers it; past its wait it is told to retry (409 with Retry-After)", async () => {
    const account = await gateway.newAccount(100);
    const body = { model: MODEL, messages: hi, temperature: 0 };
    const [soon, never] = [randomUUID(), randomUUID()];
    await running(account.wallet, soon, body, "job_first");
    await running(account.wallet, never, body, "job_stuck");
    const outcome = { kind: "response", headers: { "x-svc-job-id": "job_first" }, body: { id: "chatcmpl-job_first" } };
    const started = Date.now();
    const [waited, told] = await Promise.all([
      post("/chat/completions", account.apiKey, body, soon),
      post("/chat/completions", account.apiKey, body, never),
      new Promise((r) => setTimeout(r, 300)).then(() =>
        gateway.service.db.query("UPDATE idempotency_keys SET outcome = $3 WHERE wallet = $1 AND key = $2", [account.wallet, soon, JSON.stringify(outcome)]),
      ),
    ]);
    assert.deepEqual([waited.status, waited.headers.get(REPLAYED), waited.headers.get("x-svc-job-id"), waited.body], [200, "true", "job_first", outcome.body]);
    assert.equal(told.status, 409);
    assert.ok(Date.now() - started >= 2_000, "it waited its 2 s");
    assert.deepEqual([errorOf(told).code, told.headers.get("retry-after"), (told.body.error as { details: unknown }).details], ["idempotency_key_in_use", "1", { retry_after: 1, job_id: "job_stuck" }]);
    assert.equal((await jobIds(account.apiKey)).length, 0, "neither ran a job of its own");
  });
});

describe("disputes and webhooks with a key", () => {
  test("a dispute retried with its key answers the same dispute; a new one is refused", async () => {
    const { data, response } = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, temperature: 0 }).withResponse();
    const jobId = response.headers.get("x-svc-job-id")!;
    await jobConcluded(gateway.service, jobId);
    const key = randomUUID();
    const hash = outputHash(`${data.choices[0]!.message.content} not quite`);
    const first = await post(`/jobs/${jobId}/dispute`, gateway.apiKey, { received_output_hash: hash }, key);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    assert.equal(first.body.dispute_opened, true);
    const again = await post(`/jobs/${jobId}/dispute`, gateway.apiKey, { received_output_hash: hash }, key);
    assert.deepEqual([again.status, again.headers.get(REPLAYED), again.body], [200, "true", first.body]);
    const job = await get<{ dispute: { dispute_tx: string } }>(`/jobs/${jobId}`, gateway.apiKey);
    assert.equal(job.dispute.dispute_tx, first.body.dispute_tx);
    // Without the key the same request is a second dispute, which the job refuses: the retry above did not run.
    assert.equal((await post(`/jobs/${jobId}/dispute`, gateway.apiKey, { received_output_hash: hash })).status, 409);
  });

  test("a webhook created with a key is created once", async () => {
    const account = await gateway.newAccount(10);
    const key = randomUUID();
    const body = { url: "https://127.0.0.1:9/hook", events: ["job.completed"], secret: "a-secret-of-20-chars" };
    const first = await post("/webhooks", account.apiKey, body, key);
    assert.equal(first.status, 200, JSON.stringify(first.body));
    const again = await post("/webhooks", account.apiKey, body, key);
    assert.deepEqual([again.status, again.headers.get(REPLAYED), again.body], [200, "true", first.body]);
    const list = await get<{ data: { id: string }[] }>("/webhooks", account.apiKey);
    assert.deepEqual(list.data.map((w) => w.id), [first.body.id]);
    // A refused creation stores nothing: under the same key, the request fixed runs.
    const otherKey = randomUUID();
    const refused = await post("/webhooks", account.apiKey, { ...body, url: "ftp://example.com/hook" }, otherKey);
    assert.equal(refused.status, 400);
    const fixed = await post("/webhooks", account.apiKey, { ...body, url: "https://127.0.0.1:9/other" }, otherKey);
    assert.deepEqual([fixed.status, fixed.headers.get(REPLAYED)], [200, null]);
    assert.equal((await get<{ data: unknown[] }>("/webhooks", account.apiKey)).data.length, 2);
  });
});

describe("a job that failed after admission", () => {
  test("its error is stored: a retry answers the same error for the same job and runs nothing", async () => {
    const failing = new FailingWorker(await testWorker());
    const broken = await startTestGateway({ db: await migratedTestDb(), credits: 100, rateLimit: false, workers: [failing] });
    try {
      const key = randomUUID();
      const ask = () =>
        fetch(`${broken.baseUrl}/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${broken.apiKey}`, "content-type": "application/json", "idempotency-key": key },
          body: JSON.stringify({ model: MODEL, messages: hi }),
        });
      const first = await ask();
      const firstBody = await first.json();
      assert.ok(first.status >= 500, `a 5xx, got ${first.status}`);
      const jobId = first.headers.get("x-svc-job-id");
      assert.ok(jobId, "the job existed");
      const runs = failing.runs;
      const again = await ask();
      assert.deepEqual([again.status, again.headers.get(REPLAYED), again.headers.get("x-svc-job-id"), await again.json()], [first.status, "true", jobId, firstBody]);
      assert.equal(failing.runs, runs, "nothing ran again");
      const job = await jobConcluded(broken.service, jobId);
      assert.deepEqual([job.status, job.creditsCharged], ["failed", 0]);
      const jobs = (await (await fetch(`${broken.baseUrl}/jobs`, { headers: { authorization: `Bearer ${broken.apiKey}` } })).json()) as { data: unknown[] };
      assert.equal(jobs.data.length, 1);
    } finally {
      await broken.close();
    }
  });
});

describe("a first request whose node stopped before it answered", () => {
  // The node's stop is stood in for by what it leaves: the key's row with its job linked and no
  // outcome (the outcome the first request recorded is removed), and the job ended by recovery
  // more than UNANSWERED_AFTER_MS ago (its end moved back in the database, the clock every node shares).
  async function unanswered(service: TestGateway["service"], key: string, jobId: string) {
    await service.db.query("UPDATE idempotency_keys SET outcome = NULL WHERE key = $1", [key]);
    await service.db.query(`UPDATE jobs SET completed_at = ${minusMs(service.db, "now()", "$2::float8")} WHERE id = $1`, [jobId, UNANSWERED_AFTER_MS + 1_000]);
  }

  test("its job charged nothing: the retry runs anew, once, and is charged once", async () => {
    const failing = new FailingWorker(await testWorker());
    const broken = await startTestGateway({ db: await migratedTestDb(), credits: 100, rateLimit: false, workers: [failing], idempotencyWaitMs: 500 });
    try {
      const key = randomUUID();
      const ask = async () => {
        const res = await fetch(`${broken.baseUrl}/chat/completions`, {
          method: "POST",
          headers: { authorization: `Bearer ${broken.apiKey}`, "content-type": "application/json", "idempotency-key": key },
          body: JSON.stringify({ model: MODEL, messages: hi }),
        });
        return { status: res.status, replayed: res.headers.get(REPLAYED), jobId: res.headers.get("x-svc-job-id"), body: (await res.json()) as Record<string, unknown> };
      };
      const first = await ask();
      assert.ok(first.status >= 500 && first.jobId, `a 5xx of a job, got ${first.status}`);
      assert.deepEqual([(await jobConcluded(broken.service, first.jobId)).status], ["failed"]);
      await broken.service.db.query("UPDATE idempotency_keys SET outcome = NULL WHERE key = $1", [key]);
      const soon = await ask();
      assert.deepEqual([soon.status, (soon.body.error as { code: string }).code], [409, "idempotency_key_in_use"], "within its job's last moments the first request may still answer");
      await unanswered(broken.service, key, first.jobId);
      failing.failing = false;
      const retried = await ask();
      assert.deepEqual([retried.status, retried.replayed], [200, null]);
      assert.notEqual(retried.jobId, first.jobId, "a job of its own");
      const charged = (await jobConcluded(broken.service, retried.jobId!)).creditsCharged;
      const again = await ask();
      assert.deepEqual([again.status, again.replayed, again.jobId, again.body], [200, "true", retried.jobId, retried.body]);
      const account = (await (await fetch(`${broken.baseUrl}/account`, { headers: { authorization: `Bearer ${broken.apiKey}` } })).json()) as { credits_remaining: number };
      assert.equal(account.credits_remaining, 100 - charged, "charged once");
    } finally {
      await broken.close();
    }
  });

  test("its job was charged: the retry is told the answer was lost, naming the job, and so is every later one", async () => {
    const account = await gateway.newAccount(100);
    const key = randomUUID();
    const body = { model: MODEL, messages: hi, temperature: 0 };
    const first = await post("/chat/completions", account.apiKey, body, key);
    const jobId = first.headers.get("x-svc-job-id")!;
    const job = await jobConcluded(gateway.service, jobId);
    await unanswered(gateway.service, key, jobId);
    const told = await post("/chat/completions", account.apiKey, body, key);
    assert.equal(told.status, 500);
    assert.deepEqual([errorOf(told).code, errorOf(told).param, (told.body.error as { details: unknown }).details, told.headers.get("x-svc-job-id")], ["idempotency_answer_lost", "idempotency-key", { job_id: jobId }, jobId]);
    assert.match((told.body.error as { message: string }).message, new RegExp(`job ${jobId}, which finished and was charged`));
    const again = await post("/chat/completions", account.apiKey, body, key);
    assert.deepEqual([again.status, again.headers.get(REPLAYED), again.body], [500, "true", told.body]);
    assert.deepEqual(await jobIds(account.apiKey), [jobId], "nothing ran again");
    assert.equal(await credits(account.apiKey), 100 - job.creditsCharged, "charged once");
  });
});
