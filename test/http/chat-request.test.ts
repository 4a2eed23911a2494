/**
 * A chat-completions body as the gateway reads it: checked against its JSON schema by Fastify's
 * ajv (configured as the server configures it), then parsed into the service's shape.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import Fastify from "fastify";
import { ApiError, type ErrorCode } from "../../src/core/errors.ts";
import { MAX_TOKENS, SEED_RANGE } from "../../src/core/request-limits.ts";
import { parseChatRequest, type ChatCompletionBody } from "../../src/http/chat-request.ts";
import type { ChatRequest } from "../../src/jobs/index.ts";
import { fromFastify } from "../../src/http/errors.ts";
import { addSharedSchemas, ref } from "../../src/http/schemas.ts";
import { AJV_OPTIONS } from "../../src/http/server.ts";
import { parseGatewayMessage } from "../../src/network/protocol-parse.ts";

const app = Fastify({ ajv: AJV_OPTIONS });
addSharedSchemas(app);
app.post("/parse", { schema: { body: ref("ChatCompletionRequest") } }, async (request) => parseChatRequest(request.body as ChatCompletionBody));
app.setErrorHandler((error, _request, reply) => {
  const apiError = error instanceof ApiError ? error : fromFastify(error as Parameters<typeof fromFastify>[0]);
  return reply.status(apiError?.status ?? 500).send(apiError?.toBody("") ?? { error: { code: "internal_error" } });
});
after(() => app.close());

/**
 * Through the schema and the parser; a refusal is thrown as the ApiError the gateway would answer.
 * An accepted body is parsed again here, where `undefined` fields survive (JSON drops them).
 */
async function parse(body: unknown): Promise<ChatRequest> {
  const response = await app.inject({ method: "POST", url: "/parse", payload: JSON.stringify(body), headers: { "content-type": "application/json" } });
  const answer = response.json() as { error?: { code: ErrorCode; message: string; param: string | null } };
  if (answer.error) throw new ApiError(answer.error.code, answer.error.message, answer.error.param);
  return parseChatRequest(body as ChatCompletionBody);
}

const minimal = { model: "m", messages: [{ role: "user", content: "hi" }] };

async function rejects(body: unknown, param: string) {
  await assert.rejects(
    () => parse(body),
    (e: unknown) => e instanceof ApiError && e.code === "invalid_request" && e.param === param,
    `expected invalid_request on ${param}`,
  );
}

test("OpenAI's defaults are filled in", async () => {
  const r = await parse(minimal);
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

test("every parameter is read and range-checked", async () => {
  const r = await parse({
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
  assert.equal((await parse({ ...minimal, max_completion_tokens: 9 })).maxTokens, 9);
  await rejects({ ...minimal, temperature: 2.5 }, "temperature");
  await rejects({ ...minimal, frequency_penalty: -3 }, "frequency_penalty");
  await rejects({ ...minimal, presence_penalty: "1" }, "presence_penalty");
  await rejects({ ...minimal, max_tokens: 0 }, "max_tokens");
  await rejects({ ...minimal, max_tokens: 1.5 }, "max_tokens");
  await rejects({ ...minimal, stop: [1] }, "stop");
  await rejects({ ...minimal, seed: "7" }, "seed");
});

test("missing or malformed fields name their param", async () => {
  await rejects(null, "body");
  await rejects([], "body");
  await rejects({ messages: minimal.messages }, "model");
  await rejects({ model: "m" }, "messages");
  await rejects({ model: "m", messages: [] }, "messages");
  await rejects({ model: "m", messages: [{ role: "tool", content: "x" }] }, "messages[0].role");
  await rejects({ model: "m", messages: [{ role: "user" }] }, "messages[0].content");
  await rejects({ model: "m", messages: Array.from({ length: 2049 }, () => ({ role: "user", content: "x" })) }, "messages");
});

test("planned features are refused with a message saying so", async () => {
  for (const [field, value] of [["tools", []], ["tool_choice", "auto"], ["functions", []], ["n", 2]] as const) {
    await assert.rejects(() => parse({ ...minimal, [field]: value }), (e: unknown) => {
      return e instanceof ApiError && e.param === field && /planned/.test(e.message);
    });
  }
  await assert.rejects(
    () => parse({ model: "m", messages: [{ role: "user", content: [{ type: "text", text: "x" }] }] }),
    (e: unknown) => e instanceof ApiError && e.param === "messages[0].content" && /planned/.test(e.message),
  );
  assert.equal((await parse({ ...minimal, n: 1 })).model, "m");
});

test("a seed or max_tokens the worker protocol cannot carry is refused at the API", async () => {
  // Passed on, `seed: 1e20` would make every worker's protocol parser refuse the job.
  await rejects({ ...minimal, seed: 1e20 }, "seed");
  await rejects({ ...minimal, seed: SEED_RANGE.max + 1 }, "seed");
  await rejects({ ...minimal, seed: SEED_RANGE.min - 1 }, "seed");
  await rejects({ ...minimal, max_tokens: MAX_TOKENS + 1 }, "max_tokens");
  await rejects({ ...minimal, max_completion_tokens: 1e300 }, "max_completion_tokens");
  await rejects({ ...minimal, stop: ["a", "b", "c", "d", "e"] }, "stop");
});

test("every value the API accepts at the edges of its ranges is a job the worker protocol accepts", async () => {
  const edges = [
    { seed: SEED_RANGE.max, max_tokens: MAX_TOKENS, temperature: 2, top_p: 1, frequency_penalty: 2, presence_penalty: 2 },
    { seed: SEED_RANGE.min, max_tokens: 1, temperature: 0, top_p: 0, frequency_penalty: -2, presence_penalty: -2 },
  ];
  for (const edge of edges) {
    const messages = Array.from({ length: 2048 }, () => ({ role: "user", content: "\u0000 x".repeat(50) }));
    const chat = await parse({ ...minimal, ...edge, messages, stop: ["1", "2", "3", "4".repeat(1000)] });
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
