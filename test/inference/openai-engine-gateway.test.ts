/**
 * OpenAiEngine pointed at this project's own gateway, a real OpenAI-protocol server on loopback
 * backed by llama.cpp on the wiring model, whose designed outputs make every assertion exact. The
 * gateway exposes no tokenizer and no context window, so the engine runs on its estimate here.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { completionCost, TIERS } from "../../src/core/pricing.ts";
import { ContextLengthExceededError } from "../../src/inference/context-length-error.ts";
import type { ChatMessage } from "../../src/inference/engine.ts";
import { OpenAiEngine, UpstreamError } from "../../src/inference/openai-engine.ts";
import { estimatePromptTokens } from "../../src/inference/openai-tokens.ts";
import {
  expectedPenalizedReply,
  KNOWN_REPLY,
  KNOWN_REPLY_PIECES,
  knownReplyPrefix,
  loopText,
  TRIGGER_WORD,
} from "../../src/inference/wiring-model.ts";
import { SERVICE_MIGRATIONS } from "../../src/service.ts";
import { testDatabases } from "../support/db.ts";
import { MODEL, startTestGateway, testEngine, type TestGateway } from "../support/service.ts";
import { collect } from "./collect.ts";

let gateway: TestGateway;
let engine: OpenAiEngine;

before(async () => {
  // PGlite from the shared empty image (a fresh initdb costs seconds), loaded while llama.cpp loads
  // the model the gateway's seed worker will share.
  const [db] = await Promise.all([testDatabases()[0]!.open({ migrations: SERVICE_MIGRATIONS }), testEngine()]);
  gateway = await startTestGateway({ credits: 1000, db });
  engine = await OpenAiEngine.connect({ baseUrl: gateway.baseUrl, model: MODEL, apiKey: gateway.apiKey, contextWindow: 2048 });
});
after(async () => {
  await engine.close();
  await gateway.close();
});

interface ApiJob {
  status: string;
  credits_charged: number;
  usage: { completion_tokens: number };
}

async function latestJob(): Promise<ApiJob> {
  const res = await fetch(`${gateway.baseUrl}/jobs?limit=1`, { headers: { authorization: `Bearer ${gateway.apiKey}` } });
  return ((await res.json()) as { data: ApiJob[] }).data[0]!;
}

describe("OpenAiEngine against the project's gateway", () => {
  it("connects on the estimate path with the given window, and needs that window", async () => {
    assert.equal(engine.contextWindow, 2048);
    assert.equal(engine.contextWindowSource, "option");
    assert.equal(engine.tokenCounting, "estimate");
    const messages: ChatMessage[] = [{ role: "user", content: "Hello there" }];
    assert.equal(await engine.countPromptTokens(messages), estimatePromptTokens(messages));
    await assert.rejects(OpenAiEngine.connect({ baseUrl: gateway.baseUrl, model: MODEL, apiKey: gateway.apiKey }), /pass contextWindow/);
  });

  it("streams the exact reply at temperature 0, with the gateway's own usage", async () => {
    const messages: ChatMessage[] = [{ role: "user", content: "Hello there" }];
    const r = await collect(engine, { messages });
    assert.equal(r.text, KNOWN_REPLY);
    assert.deepEqual(r.deltas, [...KNOWN_REPLY_PIECES]);
    assert.equal(r.done?.finishReason, "stop");

    const direct = await gateway.client.chat.completions.create({ model: MODEL, messages, temperature: 0 });
    assert.deepEqual(r.done?.usage, { promptTokens: direct.usage!.prompt_tokens, completionTokens: direct.usage!.completion_tokens });
    assert.notEqual(r.done?.usage.promptTokens, estimatePromptTokens(messages), "the server's count, not the estimate");
  });

  it("max_tokens cuts with finish length, stop sequences end with stop, penalties reach the model", async () => {
    const cut = await collect(engine, { maxTokens: 3 });
    assert.equal(cut.text, knownReplyPrefix(3));
    assert.equal(cut.done?.finishReason, "length");
    assert.equal(cut.done?.usage.completionTokens, 3);

    const stopped = await collect(engine, { stop: [" wiring"] });
    assert.equal(stopped.text, KNOWN_REPLY.slice(0, KNOWN_REPLY.indexOf(" wiring")));
    assert.equal(stopped.done?.finishReason, "stop");

    const looped = await collect(engine, { messages: [{ role: "user", content: `Say ${TRIGGER_WORD}.` }], maxTokens: 6 });
    assert.equal(looped.text, loopText(6));
    assert.equal(looped.done?.finishReason, "length");
    const penalised = await collect(engine, { messages: [{ role: "user", content: `Say ${TRIGGER_WORD}.` }], presencePenalty: 1, maxTokens: 40 });
    assert.equal(penalised.text, expectedPenalizedReply(1, 0));
  });

  it("an abort mid-stream stops promptly, without done, and the gateway charges what it generated", async () => {
    const controller = new AbortController();
    let abortedAt = 0;
    const r = await collect(engine, { messages: [{ role: "user", content: TRIGGER_WORD }], maxTokens: 1500 }, controller.signal, (count) => {
      if (count === 3) {
        abortedAt = Date.now();
        controller.abort();
      }
    });
    const stoppedAfter = Date.now() - abortedAt;
    assert.equal(r.done, undefined);
    assert.equal(r.text, loopText(3));
    assert.ok(stoppedAfter < 200, `the iterator ended ${stoppedAfter} ms after the abort`);

    // The gateway saw its client go: it stopped generating rather than running 1,500 tokens, and
    // settled the tokens generated until then.
    let job = await latestJob();
    for (let i = 0; i < 100 && job.status !== "settled"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 30));
      job = await latestJob();
    }
    assert.equal(job.status, "settled");
    assert.ok(job.usage.completion_tokens >= 3 && job.usage.completion_tokens < 1500, `${job.usage.completion_tokens} tokens generated`);
    assert.equal(job.credits_charged, completionCost(TIERS.lite, job.usage.completion_tokens));
  });

  it("upstream errors: an unknown model is an UpstreamError with the gateway's status, code and message", async () => {
    const unknown = await OpenAiEngine.connect({ baseUrl: gateway.baseUrl, model: "nope/nothing", apiKey: gateway.apiKey, contextWindow: 2048 });
    try {
      await assert.rejects(collect(unknown, {}), (e: unknown) => {
        return e instanceof UpstreamError && e.status === 400 && e.code === "model_not_found" && e.message === "The model 'nope/nothing' does not exist.";
      });
    } finally {
      await unknown.close();
    }
    const badKey = await OpenAiEngine.connect({ baseUrl: gateway.baseUrl, model: MODEL, apiKey: "svc_live_" + "x".repeat(32), contextWindow: 2048 }).catch((e: unknown) => e);
    assert.ok(badKey instanceof UpstreamError && badKey.status === 401 && badKey.code === "invalid_api_key", String(badKey));
  });

  it("context: rejected before sending on the estimate, and the gateway's own rejection mapped with its numbers", async () => {
    const messages: ChatMessage[] = [{ role: "user", content: "Hi" }];
    const estimate = estimatePromptTokens(messages);
    await assert.rejects(collect(engine, { messages, maxTokens: 2048 - estimate + 1 }), (e: unknown) => {
      return e instanceof ContextLengthExceededError && e.promptTokens === estimate && e.contextWindow === 2048;
    });

    // The wiring model spends a token per byte here, three times the estimate's rate.
    const long: ChatMessage[] = [{ role: "user", content: "x ".repeat(900) }];
    const maxTokens = 2048 - estimatePromptTokens(long);
    await assert.rejects(collect(engine, { messages: long, maxTokens }), (e: unknown) => {
      return e instanceof ContextLengthExceededError && e.promptTokens > 1800 && e.maxTokens === maxTokens && e.contextWindow === 2048;
    });
  });
});
