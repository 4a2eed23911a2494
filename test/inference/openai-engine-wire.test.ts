/**
 * The upstream engine's pure parts: the event-stream reader fed in the worst possible pieces, the
 * error-body shapes, context-overflow recognition, finish_reason spellings and the request body.
 */
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import {
  contextOverflowOf,
  UpstreamError,
  upstreamErrorFromBody,
  upstreamErrorFromEvent,
} from "../../src/inference/openai-errors.ts";
import { readSse, SseParser, type SseEvent } from "../../src/inference/openai-sse.ts";
import { estimatePromptTokens } from "../../src/inference/openai-tokens.ts";
import { chatRequestBody, finishMeaning } from "../../src/inference/openai-wire.ts";
import { baseRequest } from "./collect.ts";

function parseInPieces(text: string, size: number): SseEvent[] {
  const parser = new SseParser();
  const events: SseEvent[] = [];
  for (let i = 0; i < text.length; i += size) events.push(...parser.push(text.slice(i, i + size)));
  events.push(...parser.end());
  return events;
}

async function readBytes(bytes: Uint8Array, size: number): Promise<SseEvent[]> {
  async function* pieces() {
    for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
  }
  const events: SseEvent[] = [];
  for await (const event of readSse(pieces())) events.push(event);
  return events;
}

describe("the event-stream reader", () => {
  const stream =
    ": keep-alive\n\n" +
    'data: {"a":1}\n\n' +
    'data:{"b":2}\r\n\r\n' + // no space after the colon, CRLF
    "data: line one\rdata: line two\r\r" + // lone CRs, two data lines joined by \n
    "event: ping\ndata: x\n\n" +
    'error: {"code":500,"message":"boom"}\n\n' + // llama-server's error field
    "id: 7\nretry: 10\n\n" + // fields without data: no event
    "data: [DONE]"; // no final blank line before the close
  const expected: SseEvent[] = [
    { event: "message", data: '{"a":1}' },
    { event: "message", data: '{"b":2}' },
    { event: "message", data: "line one\nline two" },
    { event: "ping", data: "x" },
    { event: "error", data: '{"code":500,"message":"boom"}' },
    { event: "message", data: "[DONE]" },
  ];

  it("gives the same events however the text is cut, a CRLF split across reads included", () => {
    for (const size of [1, 2, 3, 5, 7, 13, stream.length]) {
      assert.deepEqual(parseInPieces(stream, size), expected, `pieces of ${size}`);
    }
    // A CR ending one read and its LF starting the next make one line end, not two.
    const parser = new SseParser();
    assert.deepEqual(parser.push("data: a\r"), []);
    assert.deepEqual(parser.push("\ndata: b\r\n\r\n"), [{ event: "message", data: "a\nb" }]);
  });

  it("decodes UTF-8 characters split between reads", async () => {
    const text = 'data: {"content":"Grüße 👋 日本"}\n\n';
    const bytes = new TextEncoder().encode(text);
    for (const size of [1, 2, 3]) {
      assert.deepEqual(await readBytes(bytes, size), [{ event: "message", data: '{"content":"Grüße 👋 日本"}' }]);
    }
  });
});

describe("upstream error bodies", () => {
  it("reads every known shape into a status and a message", () => {
    const cases: Array<[string, string, string | null]> = [
      ['{"error":{"message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}}', "The model `x` does not exist.", "NotFoundError"],
      ['{"error":{"message":"no such model","type":"invalid_request_error","code":"model_not_found"}}', "no such model", "model_not_found"],
      ['{"error":"model \'x\' not found"}', "model 'x' not found", null],
      ['{"detail":"Not Found"}', "Not Found", null],
      ['{"detail":[{"loc":["body","max_completion_tokens"],"msg":"Extra inputs are not permitted","type":"extra_forbidden"}]}', "body.max_completion_tokens: Extra inputs are not permitted", null],
      ['{"object":"error","message":"legacy vLLM","type":"BadRequestError","param":null,"code":400}', "legacy vLLM", "BadRequestError"],
      ["upstream connect error or disconnect/reset before headers\n", "upstream connect error or disconnect/reset before headers", null],
    ];
    for (const [body, message, code] of cases) {
      const error = upstreamErrorFromBody(400, body);
      assert.ok(error instanceof UpstreamError);
      assert.equal(error.status, 400);
      assert.equal(error.message, message, body);
      assert.equal(error.code, code, body);
    }
    assert.equal(upstreamErrorFromBody(502, "", "Bad Gateway").message, "HTTP 502 Bad Gateway");
  });

  it("reads errors sent inside a stream", () => {
    const vllm = upstreamErrorFromEvent('{"error":{"message":"CUDA error","type":"InternalServerError","code":500}}', 200);
    assert.equal(vllm.status, 500);
    assert.match(vllm.message, /CUDA error/);
    const llama = upstreamErrorFromEvent('{"code":503,"message":"Loading model","type":"unavailable_error"}', 200);
    assert.equal(llama.status, 503);
    assert.match(llama.message, /Loading model/);
    assert.equal(llama.code, "unavailable_error");
    assert.match(upstreamErrorFromEvent("not json", 200).message, /not json/);
  });

  it("recognises context-length rejections and their numbers", () => {
    const vllm = upstreamErrorFromBody(
      400,
      JSON.stringify({
        error: {
          message:
            "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (1000 in the messages, 4000 in the completion). Please reduce the length of the messages or completion.",
          type: "BadRequestError",
          code: 400,
        },
      }),
    );
    assert.deepEqual(contextOverflowOf(vllm), { promptTokens: 1000, contextWindow: 4096 });
    const llama = upstreamErrorFromBody(
      400,
      JSON.stringify({
        error: { code: 400, message: "request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it", type: "exceed_context_size_error", n_prompt_tokens: 9412, n_ctx: 8192 },
      }),
    );
    assert.deepEqual(contextOverflowOf(llama), { promptTokens: 9412, contextWindow: 8192 });
    const gateway = upstreamErrorFromBody(
      400,
      JSON.stringify({ error: { code: "context_length_exceeded", message: "This model's context window is 2048 tokens; the messages take 1900 and max_tokens asks for 300 more." } }),
    );
    assert.deepEqual(contextOverflowOf(gateway), { promptTokens: 1900, contextWindow: 2048 });
    const bare = upstreamErrorFromBody(400, JSON.stringify({ error: { code: "context_length_exceeded", message: "too long" } }));
    assert.deepEqual(contextOverflowOf(bare), { promptTokens: undefined, contextWindow: undefined });
    assert.equal(contextOverflowOf(upstreamErrorFromBody(400, '{"error":"temperature must be at most 2"}')), null);
    assert.equal(contextOverflowOf(upstreamErrorFromBody(500, "maximum context length exceeded")), null, "only a rejection, not a crash");
  });
});

describe("wire mapping", () => {
  it("spells finish reasons the servers use", () => {
    for (const raw of ["stop", "eos", "EOS", "end_turn", "stop_sequence", "tool_calls", "something_new"]) assert.equal(finishMeaning(raw), "stop", raw);
    for (const raw of ["length", "max_tokens"]) assert.equal(finishMeaning(raw), "length", raw);
    for (const raw of ["abort", "error"]) assert.equal(finishMeaning(raw), "failed", raw);
    for (const raw of [null, undefined, ""]) assert.equal(finishMeaning(raw), null);
  });

  it("maps a generation request onto the request body", () => {
    const body = chatRequestBody("m", { ...baseRequest, maxTokens: 9, temperature: 0.5, topP: 0.9, stop: ["\n\n"], frequencyPenalty: 0.1, presencePenalty: -0.2, seed: 42 }, "max_tokens");
    assert.deepEqual(body, {
      model: "m",
      messages: baseRequest.messages,
      stream: true,
      stream_options: { include_usage: true },
      max_tokens: 9,
      temperature: 0.5,
      top_p: 0.9,
      frequency_penalty: 0.1,
      presence_penalty: -0.2,
      stop: ["\n\n"],
      seed: 42,
    });
    const plain = chatRequestBody("m", baseRequest, "max_completion_tokens");
    assert.equal(plain.max_completion_tokens, baseRequest.maxTokens);
    assert.ok(!("max_tokens" in plain) && !("stop" in plain) && !("seed" in plain), "absent options are not sent");
  });

  it("estimates prompts from UTF-8 bytes plus template overhead", () => {
    assert.equal(estimatePromptTokens([]), 32);
    assert.equal(estimatePromptTokens([{ role: "user", content: "Hi" }]), 32 + 8 + 1);
    assert.equal(estimatePromptTokens([{ role: "system", content: "日本語" }, { role: "user", content: "x".repeat(301) }]), 32 + 8 + 3 + 8 + 101);
  });
});
