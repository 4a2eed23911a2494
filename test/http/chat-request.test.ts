import assert from "node:assert/strict";
import { test } from "node:test";
import { ApiError } from "../../src/core/errors.ts";
import { parseChatRequest } from "../../src/http/chat-request.ts";

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
