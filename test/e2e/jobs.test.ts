/** The job API, the 120-second rule (shortened), key replacement and the per-IP burst limit (a caller who leaves mid-stream: disconnect.test.ts). */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { issueApiKey, suspendApiKey } from "../../src/accounts/accounts.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { TRIGGER_WORD } from "../../src/inference/wiring-model.ts";
import { jobConcluded } from "../support/eventually.ts";
import { MODEL, startTestGateway, type TestGateway } from "../support/service.ts";

const hi = [{ role: "user" as const, content: "Hi" }];

async function get(gateway: TestGateway, apiKey: string, path: string) {
  const res = await fetch(`${gateway.baseUrl}${path}`, { headers: { authorization: `Bearer ${apiKey}` } });
  return { status: res.status, body: (await res.json()) as Record<string, any> };
}

describe("GET /jobs", () => {
  let gateway: TestGateway;
  const ids: string[] = [];
  before(async () => {
    gateway = await startTestGateway({ credits: 1000 });
    for (let i = 0; i < 5; i++) {
      const { response } = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 2 }).withResponse();
      ids.push(response.headers.get("x-svc-job-id")!);
    }
    // Answered before their worker's batch settles them: the filters below read them settled.
    for (const id of ids) await jobConcluded(gateway.service, id);
  });
  after(() => gateway.close());

  test("newest first, with cursors both ways", async () => {
    const all = await get(gateway, gateway.apiKey, "/jobs");
    assert.equal(all.status, 200);
    assert.equal(all.body.object, "list");
    assert.deepEqual(all.body.data.map((j: { id: string }) => j.id), [...ids].reverse());
    assert.equal(all.body.has_more, false);
    assert.equal(all.body.next_cursor, null);

    const page = await get(gateway, gateway.apiKey, "/jobs?limit=2");
    assert.deepEqual(page.body.data.map((j: { id: string }) => j.id), [ids[4], ids[3]]);
    assert.equal(page.body.has_more, true);
    assert.equal(page.body.next_cursor, ids[3]);
    const older = await get(gateway, gateway.apiKey, `/jobs?limit=2&before=${page.body.next_cursor}`);
    assert.deepEqual(older.body.data.map((j: { id: string }) => j.id), [ids[2], ids[1]]);
    const newer = await get(gateway, gateway.apiKey, `/jobs?limit=2&after=${ids[0]}`);
    assert.deepEqual(newer.body.data.map((j: { id: string }) => j.id), [ids[2], ids[1]], "the two just newer than the cursor, newest first");
  });

  test("filters and the job object", async () => {
    const settled = await get(gateway, gateway.apiKey, `/jobs?status=settled&model=${encodeURIComponent(MODEL)}`);
    assert.equal(settled.body.data.length, 5);
    const none = await get(gateway, gateway.apiKey, "/jobs?status=refunded");
    assert.equal(none.body.data.length, 0);
    const bad = await get(gateway, gateway.apiKey, "/jobs?limit=500");
    assert.equal(bad.status, 400);
    assert.equal(bad.body.error.param, "limit");

    const one = await get(gateway, gateway.apiKey, `/jobs/${ids[0]}`);
    assert.equal(one.status, 200);
    const job = one.body;
    assert.equal(job.object, "job");
    assert.equal(job.status, "settled");
    assert.equal(job.tier, "lite");
    assert.equal(job.credits_charged, 2);
    assert.equal(job.usdc_value, 0.02);
    assert.ok(job.worker_address);
    assert.ok(Date.parse(job.created_at) <= Date.parse(job.completed_at));
    for (const field of ["escrow_tx", "settlement_tx", "escrow_address", "slot", "proof_hash"]) assert.ok(job.on_chain[field], field);
    assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
  });

  test("someone else's job is a 404 like a missing one", async () => {
    const other = await gateway.newAccount(0);
    const theirs = await get(gateway, other.apiKey, `/jobs/${ids[0]}`);
    assert.equal(theirs.status, 404);
    assert.equal(theirs.body.error.code, "not_found");
    const missing = await get(gateway, other.apiKey, "/jobs/job_01ARZ3NDEKTSV4RRFFQ69G5FAV");
    assert.deepEqual(theirs.body.error.code, missing.body.error.code);
    assert.equal((await get(gateway, other.apiKey, "/jobs")).body.data.length, 0);
  });
});

describe("the job timeout (shortened to 300 ms)", () => {
  let gateway: TestGateway;
  before(async () => {
    gateway = await startTestGateway({ credits: 100, jobTimeoutMs: 300 });
  });
  after(() => gateway.close());

  // The trigger word makes the wiring model loop until max_tokens: long enough to time out.
  const looping = [{ role: "user" as const, content: `Say ${TRIGGER_WORD}` }];

  test("a job that does not finish in time is refunded and answered 504", async () => {
    await assert.rejects(gateway.client.chat.completions.create({ model: MODEL, messages: looping, temperature: 0, max_tokens: 1900 }), (e: unknown) => {
      if (!(e instanceof OpenAI.APIError) || e.status !== 504 || e.code !== "job_timeout") return false;
      // The balance after the refund, not the 96 left at lock time.
      assert.equal(e.headers?.get("x-svc-credits-remaining"), "100");
      const details = (e.error as { details: { job_id: string; credits_refunded: number; refund_tx: string } }).details;
      return /^job_/.test(details.job_id) && details.credits_refunded === 4 && details.refund_tx.length > 60;
    });
    assert.equal(await money.availableCredits(gateway.service.db, gateway.wallet), 100, "credits are usable again at once");
    const jobs = await get(gateway, gateway.apiKey, "/jobs?status=refunded");
    assert.equal(jobs.body.data.length, 1);
    assert.equal(jobs.body.data[0].credits_charged, 0);
    assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
  });

  test("a stream that times out ends with an error event and no [DONE]", async () => {
    const stream = await gateway.client.chat.completions.create({ model: MODEL, messages: looping, temperature: 0, max_tokens: 1900, stream: true });
    let received = 0;
    await assert.rejects(
      (async () => {
        for await (const _ of stream) received++;
      })(),
      (e: unknown) => e instanceof OpenAI.APIError && /seconds/.test(e.message),
    );
    assert.ok(received > 0, "tokens arrived before the timeout");
    assert.equal(await money.availableCredits(gateway.service.db, gateway.wallet), 100);
    assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
  });
});

describe("keys and limits", () => {
  let gateway: TestGateway;
  before(async () => {
    gateway = await startTestGateway({ credits: 10, rateLimit: { ratePerSecond: 1, burst: 5 } });
  });
  after(() => gateway.close());

  test("a replaced key stops working on the next request", async () => {
    const account = await get(gateway, gateway.apiKey, "/account");
    assert.equal(account.status, 200);
    assert.equal(account.body.wallet, gateway.wallet);
    assert.equal(account.body.credits_remaining, 10);
    assert.equal(account.body.usdc_value, 0.1);
    assert.ok(account.body.last_topup_at);
    assert.ok(account.body.api_key_created_at);
    const fresh = await issueApiKey(gateway.service.db, gateway.wallet);
    const old = await get(gateway, gateway.apiKey, "/account");
    assert.equal(old.status, 401);
    assert.equal(old.body.error.code, "invalid_api_key");
    assert.equal((await get(gateway, fresh, "/account")).status, 200);
  });

  test("a suspended key is refused with 403 key_suspended", async () => {
    const suspect = await gateway.newAccount(0);
    await suspendApiKey(gateway.service.db, suspect.apiKey);
    await assert.rejects(suspect.client.models.list(), (e: unknown) => {
      return e instanceof OpenAI.PermissionDeniedError && e.code === "key_suspended";
    });
  });

  test("the per-IP burst limit answers 429 with Retry-After", async () => {
    let limited: Response | undefined;
    for (let i = 0; i < 10 && !limited; i++) {
      const res = await fetch(`${gateway.baseUrl}/models`);
      if (res.status === 429) limited = res;
    }
    assert.ok(limited, "a burst of 10 with burst size 5 is limited");
    assert.ok(Number(limited.headers.get("retry-after")) >= 1);
    const body = (await limited.json()) as { error: { code: string; type: string; details: { retry_after: number } } };
    assert.equal(body.error.code, "rate_limited");
    assert.equal(body.error.type, "rate_limit_error");
    assert.ok(body.error.details.retry_after >= 1);
  });
});

describe("the per-IP limit turned off", () => {
  test("with rateLimit false, a burst far past the default is never answered 429", async () => {
    const gateway = await startTestGateway({ credits: 0, rateLimit: false });
    try {
      const headers = { authorization: `Bearer ${gateway.apiKey}` };
      const statuses = await Promise.all(Array.from({ length: 300 }, () => fetch(`${gateway.baseUrl}/models`, { headers }).then((r) => r.status)));
      assert.deepEqual([...new Set(statuses)], [200]);
    } finally {
      await gateway.close();
    }
  });
});
