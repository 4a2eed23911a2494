import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiError } from "../../src/core/errors.ts";
import { MAX_TOKENS, SEED_RANGE } from "../../src/core/request-limits.ts";
import { parseChatRequest } from "../../src/http/chat-request.ts";
import { parseGatewayMessage } from "../../src/network/protocol-parse.ts";

const minimal = { model: "m", messages: [{ role: "user", content: "hi" }] };

function rejects(body: unknown, param: string) {
  assert.throws(
    () => parseChatRequest(body),
    (e: unknown) => e instanceof ApiError && e.code === "invalid_request" && e.param === param,
    `expected invalid_request on ${param}`,
  );
}

test("OpenAI's defaults are filled in", () => {
  const r = parseChatRequest(minimal);
  assert.deepEqual(r, {
    model: "m",
    messages: [{ role: "user", content: "hi" }],
    stream: false,
    includeUsage: false,
    maxTokens: undefined,
    temperature: 1,
    topP: 1,
    stop: [],
    frequencyPenalty: 0,
    presencePenalty: 0,
    seed: undefined,
  });
});

test("every parameter is read and range-checked", () => {
  const r = parseChatRequest({
    ...minimal,
    stream: true,
    stream_options: { include_usage: true },
    max_tokens: 5,
    temperature: 0,
    top_p: 0.5,
    stop: "x",
    frequency_penalty: -2,
    presence_penalty: 2,
    seed: 42,
    user: "ignored", // unknown fields are ignored
  });
  assert.equal(r.stream, true);
  assert.equal(r.includeUsage, true);
  assert.equal(r.maxTokens, 5);
  assert.deepEqual(r.stop, ["x"]);
  assert.equal(r.seed, 42);
  assert.equal(parseChatRequest({ ...minimal, max_completion_tokens: 9 }).maxTokens, 9);
  rejects({ ...minimal, temperature: 2.5 }, "temperature");
  rejects({ ...minimal, frequency_penalty: -3 }, "frequency_penalty");
  rejects({ ...minimal, presence_penalty: "1" }, "presence_penalty");
  rejects({ ...minimal, max_tokens: 0 }, "max_tokens");
  rejects({ ...minimal, max_tokens: 1.5 }, "max_tokens");
  rejects({ ...minimal, stop: [1] }, "stop");
  rejects({ ...minimal, seed: "7" }, "seed");
});

test("missing or malformed fields name their param", () => {
  rejects(null, "body");
  rejects([], "body");
  rejects({ messages: minimal.messages }, "model");
  rejects({ model: "m" }, "messages");
  rejects({ model: "m", messages: [] }, "messages");
  rejects({ model: "m", messages: [{ role: "tool", content: "x" }] }, "messages[0].role");
  rejects({ model: "m", messages: [{ role: "user" }] }, "messages[0].content");
  rejects({ model: "m", messages: Array.from({ length: 2049 }, () => ({ role: "user", content: "x" })) }, "messages");
});

test("planned features are refused with a message saying so", () => {
  for (const [field, value] of [["tools", []], ["tool_choice", "auto"], ["functions", []], ["n", 2]] as const) {
    assert.throws(() => parseChatRequest({ ...minimal, [field]: value }), (e: unknown) => {
      return e instanceof ApiError && e.param === field && /planned/.test(e.message);
    });
  }
  assert.throws(
    () => parseChatRequest({ model: "m", messages: [{ role: "user", content: [{ type: "text", text: "x" }] }] }),
    (e: unknown) => e instanceof ApiError && e.param === "messages[0].content" && /planned/.test(e.message),
  );
  assert.equal(parseChatRequest({ ...minimal, n: 1 }).model, "m");
});

test("a seed or max_tokens the worker protocol cannot carry is refused at the API (issue 7.1)", () => {
  // `seed: 1e20` used to pass here and make every worker's protocol parser refuse the job.
  rejects({ ...minimal, seed: 1e20 }, "seed");
  rejects({ ...minimal, seed: SEED_RANGE.max + 1 }, "seed");
  rejects({ ...minimal, seed: SEED_RANGE.min - 1 }, "seed");
  rejects({ ...minimal, max_tokens: MAX_TOKENS + 1 }, "max_tokens");
  rejects({ ...minimal, max_completion_tokens: 1e300 }, "max_completion_tokens");
  rejects({ ...minimal, stop: ["a", "b", "c", "d", "e"] }, "stop");
});

test("every value the API accepts at the edges of its ranges is a job the worker protocol accepts", () => {
  const edges = [
    { seed: SEED_RANGE.max, max_tokens: MAX_TOKENS, temperature: 2, top_p: 1, frequency_penalty: 2, presence_penalty: 2 },
    { seed: SEED_RANGE.min, max_tokens: 1, temperature: 0, top_p: 0, frequency_penalty: -2, presence_penalty: -2 },
  ];
  for (const edge of edges) {
    const messages = Array.from({ length: 2048 }, () => ({ role: "user", content: "\u0000 x".repeat(50) }));
    const chat = parseChatRequest({ ...minimal, ...edge, messages, stop: ["1", "2", "3", "4".repeat(1000)] });
    // The job message as the gateway sends it to a worker (jobs/job-service.ts builds the same fields).
    const request = {
      messages: chat.messages,
      maxTokens: chat.maxTokens,
      temperature: chat.temperature,
      topP: chat.topP,
      stop: chat.stop,
      frequencyPenalty: chat.frequencyPenalty,
      presencePenalty: chat.presencePenalty,
      seed: chat.seed,
    };
    const parsed = parseGatewayMessage(JSON.stringify({ type: "job", jobId: "job_1", model: "m", request }));
    assert.equal(parsed.type, "job");
    assert.deepEqual(parsed.type === "job" && parsed.request, request);
  }
});
