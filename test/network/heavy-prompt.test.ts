/**
 * One huge prompt must not freeze the gateway: a 3,000,000-character single word can hold a
 * tokenizer for minutes. Here, as in `svc dev`, the worker runs in the gateway's own process;
 * the prompt is refused by its length alone, nothing is charged, and
 * `GET /v1/models` keeps answering meanwhile. The event loop's delay is measured and printed.
 */
import assert from "node:assert/strict";
import { monitorEventLoopDelay } from "node:perf_hooks";
import { after, before, test } from "node:test";
import { MODEL, type TestGateway } from "../support/service.ts";
import { startWorkerFixture, type WorkerFixture } from "../support/worker-fixture.ts";

/** Generous for a shared two-core machine; the freeze it guards against lasted minutes. */
const MODELS_WITHIN_MS = 1_500;

let fixture: WorkerFixture;
let gateway: TestGateway;

before(async () => {
  fixture = await startWorkerFixture({ credits: 100 });
  gateway = fixture.gateway;
  await fixture.attach();
  // The gateway loads the model's vocabulary on its first request; that is not what is measured.
  await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 2 });
});
after(() => fixture.close());

const auth = () => ({ authorization: `Bearer ${gateway.apiKey}`, "content-type": "application/json" });

async function credits(): Promise<number> {
  return ((await (await fetch(`${gateway.baseUrl}/account`, { headers: auth() })).json()) as { credits_remaining: number }).credits_remaining;
}

/** Sends `content` as one user message while timing `GET /v1/models` and the event loop's delay. */
async function underLoad(content: string, maxTokens: number) {
  const delay = monitorEventLoopDelay({ resolution: 10 });
  const modelTimes: number[] = [];
  let sending = true;
  delay.enable();
  const probing = (async () => {
    while (sending) {
      const started = performance.now();
      const response = await fetch(`${gateway.baseUrl}/models`, { headers: auth() });
      assert.equal(response.status, 200);
      await response.arrayBuffer();
      modelTimes.push(performance.now() - started);
      // Paced under the per-IP burst limit, which would answer 429 instead.
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  })();
  const started = performance.now();
  const response = await fetch(`${gateway.baseUrl}/chat/completions`, {
    method: "POST",
    headers: auth(),
    body: JSON.stringify({ model: MODEL, messages: [{ role: "user", content }], max_tokens: maxTokens }),
  });
  const body = (await response.json()) as { error: { code: string } };
  const elapsedMs = performance.now() - started;
  sending = false;
  await probing;
  delay.disable();
  const figures = { elapsedMs: Math.round(elapsedMs), modelsMaxMs: Math.round(Math.max(...modelTimes)), loopDelayMaxMs: Math.round(delay.max / 1e6), loopDelayP99Ms: Math.round(delay.percentile(99) / 1e6) };
  return { status: response.status, code: body.error?.code, figures };
}

test("a 3,000,000-character word is refused at once and /v1/models keeps answering", async () => {
  const balance = await credits();
  const result = await underLoad("a".repeat(3_000_000), 16);
  console.log("3,000,000-character word:", JSON.stringify(result.figures));
  assert.equal(result.status, 400);
  assert.equal(result.code, "context_length_exceeded");
  assert.ok(result.figures.modelsMaxMs < MODELS_WITHIN_MS, `GET /v1/models took ${result.figures.modelsMaxMs} ms`);
  assert.equal(await credits(), balance, "nothing charged");
});

test("the longest word the length bound lets through is tokenized and refused without a freeze", async () => {
  // 2048-token window, 12-byte longest token: 24,000 bytes may hold as few as 2,000 tokens, so
  // only the worker's exact count can refuse it. This is the most tokenizing a request can cause.
  const balance = await credits();
  const result = await underLoad("a".repeat(24_000), 16);
  console.log("24,000-character word:", JSON.stringify(result.figures));
  assert.equal(result.status, 400);
  assert.equal(result.code, "context_length_exceeded");
  assert.ok(result.figures.modelsMaxMs < MODELS_WITHIN_MS, `GET /v1/models took ${result.figures.modelsMaxMs} ms`);
  assert.equal(await credits(), balance, "nothing charged");
});
