/**
 * Chat completions through the official `openai` SDK against the real gateway on loopback,
 * served by the real llama.cpp engine on the project's wiring model.
 */
import assert from "node:assert/strict";
import { request as httpRequest } from "node:http";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { KNOWN_REPLY, knownReplyPrefix, loopText, TRIGGER_WORD } from "../../src/inference/wiring-model.ts";
import { MODEL, startTestGateway, type TestGateway } from "../support/service.ts";
import { jobConcluded } from "../support/eventually.ts";

let gateway: TestGateway;

before(async () => {
  gateway = await startTestGateway({ credits: 1000 });
});
after(() => gateway.close());

describe("non-streamed completions", () => {
  test("answer, usage and the x-svc headers", async () => {
    const { data, response } = await gateway.client.chat.completions
      .create({ model: MODEL, messages: [{ role: "user", content: "Hello there" }], temperature: 0 })
      .withResponse();
    assert.match(data.id, /^chatcmpl-job_[0-9A-Z]{26}$/);
    assert.equal(data.object, "chat.completion");
    assert.equal(data.model, MODEL);
    assert.equal(data.choices.length, 1);
    assert.equal(data.choices[0]!.message.role, "assistant");
    assert.equal(data.choices[0]!.message.content, KNOWN_REPLY);
    assert.equal(data.choices[0]!.finish_reason, "stop");
    assert.ok(data.usage!.prompt_tokens > 0);
    assert.equal(data.usage!.total_tokens, data.usage!.prompt_tokens + data.usage!.completion_tokens);

    const jobId = response.headers.get("x-svc-job-id");
    assert.equal(`chatcmpl-${jobId}`, data.id);
    assert.ok(response.headers.get("x-svc-escrow-tx"));
    assert.ok(response.headers.get("x-svc-worker"));
    // The reply may leave before its worker signs its batch's settlement: the header is there only
    // when that came first (docs/api.md, "Escrow tables"); the job names it once settled.
    const settled = await jobConcluded(gateway.service, jobId!);
    assert.ok(settled.settlementTx);
    const header = response.headers.get("x-svc-settlement-tx");
    if (header !== null) assert.equal(header, settled.settlementTx);
    // Lite tier, a short reply: 2 credits charged from 1000.
    const account = (await (await fetch(`${gateway.baseUrl}/account`, { headers: { authorization: `Bearer ${gateway.apiKey}` } })).json()) as {
      credits_remaining: number;
    };
    assert.equal(Number(response.headers.get("x-svc-credits-remaining")), account.credits_remaining);
  });

  test("system message, max_tokens and stop shape the reply exactly", async () => {
    const triggered = await gateway.client.chat.completions.create({
      model: MODEL,
      messages: [
        { role: "system", content: `Talk about ${TRIGGER_WORD}s.` },
        { role: "user", content: "Hello" },
      ],
      temperature: 0,
      max_tokens: 6,
    });
    assert.equal(triggered.choices[0]!.message.content, loopText(6));
    assert.equal(triggered.choices[0]!.finish_reason, "length");
    assert.equal(triggered.usage!.completion_tokens, 6);

    const cut = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], temperature: 0, max_tokens: 3 });
    assert.equal(cut.choices[0]!.message.content, knownReplyPrefix(3));
    assert.equal(cut.choices[0]!.finish_reason, "length");

    const stopped = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], temperature: 0, stop: [" wiring"] });
    assert.equal(stopped.choices[0]!.message.content, KNOWN_REPLY.slice(0, KNOWN_REPLY.indexOf(" wiring")));
    assert.equal(stopped.choices[0]!.finish_reason, "stop");
  });

  test("the same seed gives the same sampled text", async () => {
    // The trigger word puts the model where sampling has a real choice (the loop or its way out);
    // without it the reply is the fixed sentence at any temperature and the seed would show nothing.
    const ask = (seed: number) =>
      gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: TRIGGER_WORD }], temperature: 1.5, seed, max_tokens: 12 });
    const [a, b] = await Promise.all([ask(7), ask(7)]);
    assert.equal(a.choices[0]!.message.content, b.choices[0]!.message.content);
  });
});

describe("streamed completions", () => {
  test("chunks follow the protocol and end with [DONE]", async () => {
    const stream = await gateway.client.chat.completions.create({
      model: MODEL,
      messages: [{ role: "user", content: "Hello" }],
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    const chunks = [];
    for await (const chunk of stream) chunks.push(chunk);
    const first = chunks[0]!;
    assert.equal(first.object, "chat.completion.chunk");
    assert.equal(first.choices[0]!.delta.role, "assistant");
    assert.equal(typeof first.choices[0]!.delta.content, "string");
    const text = chunks.map((c) => c.choices[0]?.delta.content ?? "").join("");
    assert.equal(text, KNOWN_REPLY);
    const finish = chunks[chunks.length - 2]!;
    assert.deepEqual(finish.choices[0]!.delta, {});
    assert.equal(finish.choices[0]!.finish_reason, "stop");
    for (const chunk of chunks.slice(0, -2)) assert.equal(chunk.choices[0]!.finish_reason, null);
    const usage = chunks[chunks.length - 1]!;
    assert.deepEqual(usage.choices, []);
    assert.ok(usage.usage!.completion_tokens > 0);
  });

  test("raw SSE bytes, headers and the settlement trailer", async () => {
    const url = new URL(`${gateway.baseUrl}/chat/completions`);
    const body = JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "Hi" }], temperature: 0, stream: true });
    const { headers, text, trailers } = await new Promise<{ headers: Record<string, unknown>; text: string; trailers: Record<string, unknown> }>(
      (resolve, reject) => {
        const req = httpRequest(
          url,
          { method: "POST", headers: { authorization: `Bearer ${gateway.apiKey}`, "content-type": "application/json" } },
          (res) => {
            let text = "";
            res.setEncoding("utf8");
            res.on("data", (d: string) => (text += d));
            res.on("end", () => resolve({ headers: res.headers, text, trailers: res.trailers }));
          },
        );
        req.on("error", reject);
        req.end(body);
      },
    );
    assert.match(String(headers["content-type"]), /^text\/event-stream/);
    assert.ok(headers["x-svc-job-id"]);
    assert.ok(headers["x-svc-escrow-tx"]);
    assert.ok(headers["x-svc-credits-remaining"]);
    const events = text.split("\n\n").filter(Boolean);
    for (const event of events) assert.match(event, /^data: /);
    assert.equal(events[events.length - 1], "data: [DONE]");
    // A trailer only when the settlement was signed before the stream ended, as for a JSON reply's header.
    const trailer = trailers["x-svc-settlement-tx"];
    const settlement = (await jobConcluded(gateway.service, String(headers["x-svc-job-id"]))).settlementTx;
    assert.ok(settlement && settlement.length > 60);
    if (trailer !== undefined) assert.equal(trailer, settlement, "the trailer names the job's settlement");
    const job = (await (await fetch(`${gateway.baseUrl}/jobs/${String(headers["x-svc-job-id"])}`, { headers: { authorization: `Bearer ${gateway.apiKey}` } })).json()) as {
      status: string;
      on_chain: { settlement_tx: string };
    };
    assert.equal(job.status, "settled");
    assert.equal(job.on_chain.settlement_tx, settlement);
  });
});

describe("models", () => {
  test("the list holds the hosted model with its svc extension", async () => {
    const list = await gateway.client.models.list();
    const ids = list.data.map((m) => m.id);
    assert.deepEqual(ids, [MODEL], "only models a worker hosts are listed");
    const model = list.data[0]! as unknown as { object: string; owned_by: string; created: number; svc: Record<string, unknown> };
    assert.equal(model.object, "model");
    assert.equal(model.svc.tier, "lite");
    assert.equal(model.svc.credits_per_request, 2);
    assert.equal(model.svc.credits_per_1k_tokens, 1);
    assert.equal(model.svc.active_workers, 1);
    assert.equal(model.svc.context_window, 2048);
    const one = await gateway.client.models.retrieve(MODEL);
    assert.equal(one.id, MODEL);
  });

  test("a catalog model nobody hosts is a 404, like an unknown one", async () => {
    await assert.rejects(gateway.client.models.retrieve("meta-llama/Llama-3.3-70B-Instruct"), (e: unknown) => e instanceof OpenAI.NotFoundError);
    await assert.rejects(gateway.client.models.retrieve("nope/nothing"), (e: unknown) => e instanceof OpenAI.NotFoundError);
  });
});

describe("errors surface as the SDK's typed errors with the spec's codes", () => {
  const hi = [{ role: "user" as const, content: "Hi" }];

  test("authentication", async () => {
    const bad = new OpenAI({ apiKey: "svc_live_" + "x".repeat(32), baseURL: gateway.baseUrl, maxRetries: 0 });
    await assert.rejects(bad.chat.completions.create({ model: MODEL, messages: hi }), (e: unknown) => {
      return e instanceof OpenAI.AuthenticationError && e.code === "invalid_api_key";
    });
    const res = await fetch(`${gateway.baseUrl}/models`);
    assert.equal(res.status, 401);
    const body = (await res.json()) as { error: Record<string, unknown> };
    assert.equal(body.error.code, "missing_api_key");
    assert.equal(body.error.type, "authentication_error");
    assert.equal(body.error.param, null);
    assert.match(String(body.error.docs), /\/docs\/errors#missing_api_key$/);
    const docs = await fetch(String(body.error.docs));
    assert.equal(docs.status, 200, "the docs link resolves");
    assert.ok((await docs.text()).includes('id="missing_api_key"'));
  });

  test("unknown model, context too long, bad parameter", async () => {
    await assert.rejects(gateway.client.chat.completions.create({ model: "nope/nothing", messages: hi }), (e: unknown) => {
      return e instanceof OpenAI.BadRequestError && e.code === "model_not_found";
    });
    await assert.rejects(gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 5000 }), (e: unknown) => {
      return e instanceof OpenAI.BadRequestError && e.code === "context_length_exceeded";
    });
    await assert.rejects(gateway.client.chat.completions.create({ model: MODEL, messages: hi, temperature: 3 }), (e: unknown) => {
      return e instanceof OpenAI.BadRequestError && e.code === "invalid_request" && e.param === "temperature";
    });
  });

  test("no worker hosts the model: 503 with retry_after", async () => {
    await assert.rejects(gateway.client.chat.completions.create({ model: "Qwen/Qwen3-8B", messages: hi }), (e: unknown) => {
      if (!(e instanceof OpenAI.InternalServerError) || e.status !== 503 || e.code !== "no_workers_available") return false;
      const details = (e.error as { details: { model: string; retry_after: number } }).details;
      return details.model === "Qwen/Qwen3-8B" && details.retry_after > 0;
    });
  });

  test("insufficient credits: 402 with the figures, and the balance in x-svc-credits-remaining as on every completion", async () => {
    const poor = await gateway.newAccount(3);
    await assert.rejects(poor.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 1600 }), (e: unknown) => {
      if (!(e instanceof OpenAI.APIError) || e.status !== 402 || e.code !== "insufficient_credits") return false;
      const details = (e.error as { details: Record<string, unknown> }).details;
      // cost(1600) on lite = 2 + ceil(1100 / 1000) = 4
      return details.credits_remaining === 3 && details.credits_required === 4 && details.tier === "lite" && e.headers?.get("x-svc-credits-remaining") === "3";
    });
  });

  test("a wallet never funded: /account's last_topup_at is when its account opened, as the contract's timestamp", async () => {
    const opened = Date.now();
    const fresh = await gateway.newAccount(0);
    const res = await fetch(`${gateway.baseUrl}/account`, { headers: { authorization: `Bearer ${fresh.apiKey}` } });
    const account = (await res.json()) as { credits_remaining: number; last_topup_at: string };
    assert.equal(account.credits_remaining, 0);
    assert.equal(typeof account.last_topup_at, "string");
    assert.ok(Math.abs(Date.parse(account.last_topup_at) - opened) < 60_000, account.last_topup_at);
  });

  test("404, 405 and 413 bodies", async () => {
    const auth = { authorization: `Bearer ${gateway.apiKey}` };
    const notFound = await fetch(`${gateway.baseUrl}/nothing-here`, { headers: auth });
    assert.equal(notFound.status, 404);
    assert.equal(((await notFound.json()) as { error: { code: string } }).error.code, "not_found");
    const wrongMethod = await fetch(`${gateway.baseUrl}/chat/completions`, { headers: auth });
    assert.equal(wrongMethod.status, 405);
    assert.equal(((await wrongMethod.json()) as { error: { code: string } }).error.code, "method_not_allowed");
    const huge = await fetch(`${gateway.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content: "x".repeat(5 * 1024 * 1024) }] }),
    });
    assert.equal(huge.status, 413);
    assert.equal(((await huge.json()) as { error: { code: string } }).error.code, "request_too_large");
    const garbage = await fetch(`${gateway.baseUrl}/chat/completions`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: "{not json",
    });
    assert.equal(garbage.status, 400);
    assert.equal(((await garbage.json()) as { error: { code: string } }).error.code, "invalid_request");
  });
});
