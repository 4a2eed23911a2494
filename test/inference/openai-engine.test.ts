/**
 * OpenAiEngine against a loopback protocol peer speaking the vLLM, llama-server and Ollama dialects
 * (test/support/upstream-server.ts): discovery, token counting, the completion-limit field, usage
 * and finish_reason variants, error shapes, streams cut into awkward TCP writes, abort and close.
 */
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, describe, it } from "node:test";
import { ContextLengthExceededError } from "../../src/inference/context-length-error.ts";
import type { ChatMessage } from "../../src/inference/engine.ts";
import { OpenAiEngine, UpstreamError, type OpenAiEngineOptions } from "../../src/inference/openai-engine.ts";
import { RELEASE_GRACE_MS } from "../../src/inference/openai-http.ts";
import { estimatePromptTokens } from "../../src/inference/openai-tokens.ts";
import { startUpstream, type Dialect, type UpstreamBehaviour, type UpstreamServer } from "../support/upstream-server.ts";
import { baseRequest, collect } from "./collect.ts";

const REPLY = ["Grüße", ",", " Welt", "!", " 👋", " Bye", "."];
const MESSAGES: ChatMessage[] = [
  { role: "system", content: "You are terse." },
  { role: "user", content: "Say hello in German, then wave." },
];

const cleanups: Array<() => Promise<void>> = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

async function upstream(dialect: Dialect, behaviour: Partial<UpstreamBehaviour> = {}): Promise<UpstreamServer> {
  const server = await startUpstream(dialect, behaviour);
  cleanups.push(() => server.close());
  return server;
}

async function engineFor(server: UpstreamServer, options: Partial<OpenAiEngineOptions> = {}): Promise<OpenAiEngine> {
  const engine = await OpenAiEngine.connect({ baseUrl: server.baseUrl, model: server.behaviour.model, ...options });
  cleanups.push(() => engine.close());
  return engine;
}

/** Iterates by hand so the deltas given before a failure can be checked along with the failure. */
async function deltasUntilFailure(engine: OpenAiEngine, request: Partial<typeof baseRequest>): Promise<{ deltas: string[]; error: unknown }> {
  const deltas: string[] = [];
  try {
    for await (const event of engine.generate({ ...baseRequest, ...request })) {
      if (event.type === "done") return { deltas, error: undefined };
      deltas.push(event.text);
    }
  } catch (error) {
    return { deltas, error };
  }
  return { deltas, error: undefined };
}

describe("discovery and token counting", () => {
  it("vLLM: the window from /v1/models max_model_len, prompt counts from /tokenize", async () => {
    const server = await upstream("vllm", { contextWindow: 8192 });
    const engine = await engineFor(server);
    assert.equal(engine.contextWindow, 8192);
    assert.equal(engine.contextWindowSource, "vllm-models");
    assert.equal(engine.tokenCounting, "server");
    assert.equal(await engine.countPromptTokens(MESSAGES), server.promptTokens(MESSAGES));
    const tokenize = server.requests.filter((r) => r.path === "/tokenize").at(-1)!;
    assert.deepEqual(tokenize.body, { model: server.behaviour.model, messages: MESSAGES, add_generation_prompt: true });
  });

  it("llama-server: /props n_ctx rather than n_ctx_train, /apply-template then /tokenize with special tokens", async () => {
    const server = await upstream("llama-server", { contextWindow: 2048 });
    const engine = await engineFor(server);
    assert.equal(engine.contextWindow, 2048);
    assert.equal(engine.contextWindowSource, "llama-server-props");
    assert.equal(engine.tokenCounting, "server");
    assert.equal(await engine.countPromptTokens(MESSAGES), server.promptTokens(MESSAGES), "the BOS token included");
    const paths = server.requests.slice(-2).map((r) => r.path);
    assert.deepEqual(paths, ["/apply-template", "/tokenize"]);
  });

  it("Ollama: num_ctx when the Modelfile sets it, else model_info's context_length; no tokenizer, so the estimate", async () => {
    const plain = await upstream("ollama", { contextWindow: 32768 });
    const engine = await engineFor(plain);
    assert.equal(engine.contextWindow, 32768);
    assert.equal(engine.contextWindowSource, "ollama-show");
    assert.equal(engine.tokenCounting, "estimate");
    assert.equal(await engine.countPromptTokens(MESSAGES), estimatePromptTokens(MESSAGES));
    const show = plain.requests.find((r) => r.path === "/api/show")!;
    assert.equal(show.body?.model, plain.behaviour.model);

    const tuned = await upstream("ollama", { contextWindow: 32768, ollamaNumCtx: 8192 });
    assert.equal((await engineFor(tuned)).contextWindow, 8192);
  });

  it("the contextWindow option can lower a reported window, and is required when none is reported", async () => {
    const server = await upstream("vllm", { contextWindow: 8192 });
    const lowered = await engineFor(server, { contextWindow: 1000 });
    assert.equal(lowered.contextWindow, 1000);
    assert.equal(lowered.contextWindowSource, "option");
    const notRaised = await engineFor(server, { contextWindow: 100_000 });
    assert.equal(notRaised.contextWindow, 8192);
    assert.equal(notRaised.contextWindowSource, "vllm-models");

    for (const dialect of ["vllm", "llama-server", "ollama"] as const) {
      const silent = await upstream(dialect, { discovery: false });
      await assert.rejects(engineFor(silent), /does not report the context window.*pass contextWindow/, dialect);
      const given = await engineFor(silent, { contextWindow: 3000 });
      assert.equal(given.contextWindow, 3000);
      assert.equal(given.contextWindowSource, "option");
    }
  });

  it("connecting fails clearly when the upstream is down or refuses the API key", async () => {
    const gone = await startUpstream("vllm");
    await gone.close();
    await assert.rejects(OpenAiEngine.connect({ baseUrl: gone.baseUrl, model: "m" }), (e: unknown) => {
      return e instanceof UpstreamError && e.status === null && /ECONNREFUSED/.test(e.message);
    });

    const guarded = await upstream("vllm", { apiKey: "sk-upstream" });
    await assert.rejects(engineFor(guarded, { apiKey: "sk-wrong" }), (e: unknown) => {
      return e instanceof UpstreamError && e.status === 401 && e.message === "Unauthorized";
    });
    const engine = await engineFor(guarded, { apiKey: "sk-upstream" });
    const r = await collect(engine, { messages: MESSAGES });
    assert.equal(r.text, REPLY.join(""));
    assert.equal(guarded.chatRequests().at(-1)!.headers.authorization, "Bearer sk-upstream");

    await assert.rejects(OpenAiEngine.connect({ baseUrl: "localhost:8000", model: "m" }), TypeError);
    await assert.rejects(OpenAiEngine.connect({ baseUrl: guarded.baseUrl, model: "" }), TypeError);
  });

  it("follows a redirect, as a proxy in front of the server may answer one", async () => {
    const server = await upstream("vllm");
    // Sends every request on, method and body kept (307), to the real server.
    const proxy = createServer((req, res) => {
      res.writeHead(307, { location: new URL(req.url!, server.baseUrl).href });
      res.end();
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    cleanups.push(() => new Promise((resolve) => proxy.close(() => resolve())));
    const engine = await OpenAiEngine.connect({ baseUrl: `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/v1`, model: server.behaviour.model });
    cleanups.push(() => engine.close());
    assert.equal(await engine.countPromptTokens(MESSAGES), server.promptTokens(MESSAGES));
    assert.equal((await collect(engine, { messages: MESSAGES })).text, REPLY.join(""));
  });
});

describe("streamed generation in each dialect", () => {
  for (const dialect of ["vllm", "llama-server", "ollama"] as const) {
    it(`${dialect}: exact text from a stream split mid-line and mid-character, CRLF, keep-alives, "data:" without a space`, async () => {
      const server = await upstream(dialect, { lineEnding: "\r\n", keepAlives: true, dataPrefix: "data:" });
      const engine = await engineFor(server);
      const r = await collect(engine, { messages: MESSAGES, temperature: 0.7, topP: 0.9, seed: 11, frequencyPenalty: 0.5, presencePenalty: -0.5 });
      assert.deepEqual(r.deltas, REPLY);
      assert.equal(r.done?.finishReason, "stop");
      assert.deepEqual(r.done?.usage, { promptTokens: server.promptTokens(MESSAGES), completionTokens: REPLY.length });

      const sent = server.chatRequests().at(-1)!.body!;
      assert.deepEqual(sent, {
        model: server.behaviour.model,
        messages: MESSAGES,
        stream: true,
        stream_options: { include_usage: true },
        max_tokens: baseRequest.maxTokens,
        temperature: 0.7,
        top_p: 0.9,
        frequency_penalty: 0.5,
        presence_penalty: -0.5,
        seed: 11,
      });
    });
  }

  it("max_tokens ends with length; a stop sequence ends with stop and never shows, even in part", async () => {
    const server = await upstream("vllm");
    const engine = await engineFor(server);
    const cut = await collect(engine, { maxTokens: 3 });
    assert.equal(cut.text, "Grüße, Welt");
    assert.equal(cut.done?.finishReason, "length");
    assert.equal(cut.done?.usage.completionTokens, 3);

    const stopped = await collect(engine, { stop: ["! 👋"] });
    assert.equal(stopped.text, "Grüße, Welt");
    assert.equal(stopped.done?.finishReason, "stop");
    assert.equal(stopped.done?.usage.completionTokens, 5, "the tokens spelling the stop sequence were generated");
    assert.deepEqual(server.chatRequests().at(-1)!.body!.stop, ["! 👋"]);
  });

  it("usage in the finishing chunk (llama-server style) or in its own chunk (vLLM style) is the server's", async () => {
    for (const usage of ["final-chunk", "separate"] as const) {
      const server = await upstream("vllm", { usage });
      const r = await collect(await engineFor(server), { messages: MESSAGES });
      assert.deepEqual(r.done?.usage, { promptTokens: server.promptTokens(MESSAGES), completionTokens: REPLY.length }, usage);
    }
  });

  it("without usage: the prompt as counted before sending; the completion by chunks, or by the tokenizer when chunks pack tokens", async () => {
    const ollama = await upstream("ollama", { usage: "none" });
    const fromChunks = await collect(await engineFor(ollama), { messages: MESSAGES });
    assert.deepEqual(fromChunks.done?.usage, { promptTokens: estimatePromptTokens(MESSAGES), completionTokens: REPLY.length });

    // Two tokens per chunk: 4 content chunks for 7 tokens; the tokenizer recounts the text.
    const vllm = await upstream("vllm", { usage: "none", tokensPerChunk: 2 });
    const packed = await collect(await engineFor(vllm), { messages: MESSAGES });
    assert.equal(packed.deltas.length, 4);
    assert.equal(packed.text, REPLY.join(""));
    assert.deepEqual(packed.done?.usage, { promptTokens: vllm.promptTokens(MESSAGES), completionTokens: REPLY.length });
    const recount = vllm.requests.filter((r) => r.path === "/tokenize").at(-1)!;
    assert.deepEqual(recount.body, { model: vllm.behaviour.model, prompt: REPLY.join(""), add_special_tokens: false });

    const limited = await collect(await engineFor(ollama), { maxTokens: 3 });
    assert.equal(limited.done?.finishReason, "length");
    assert.equal(limited.done?.usage.completionTokens, 3, "a generation cut by the limit produced exactly the limit");
  });

  it("finish_reason spellings, and none at all", async () => {
    const spelled = await upstream("llama-server", { finishReasons: { stop: "eos", length: "max_tokens" } });
    const engine = await engineFor(spelled);
    assert.equal((await collect(engine, {})).done?.finishReason, "stop");
    assert.equal((await collect(engine, { maxTokens: 2 })).done?.finishReason, "length");

    const silent = await upstream("ollama", { finishReasons: { stop: null, length: null } });
    const quiet = await engineFor(silent);
    const whole = await collect(quiet, {});
    assert.equal(whole.text, REPLY.join(""));
    assert.equal(whole.done?.finishReason, "stop");
    assert.equal((await collect(quiet, { maxTokens: 2 })).done?.finishReason, "length", "inferred from the count");

    const noDone = await upstream("vllm", { sendDone: false });
    const ended = await collect(await engineFor(noDone), {});
    assert.equal(ended.done?.finishReason, "stop", "a finish_reason then a clean close is a finished stream");
  });

  it("a server that ignores stream: true and sends one JSON completion", async () => {
    const server = await upstream("vllm", { ignoreStream: true });
    const r = await collect(await engineFor(server), { messages: MESSAGES });
    assert.deepEqual(r.deltas, [REPLY.join("")]);
    assert.deepEqual(r.done, { type: "done", finishReason: "stop", usage: { promptTokens: server.promptTokens(MESSAGES), completionTokens: REPLY.length } });
  });
});

describe("the completion-limit field", () => {
  it("switches to max_completion_tokens on a 400 naming max_tokens, remembers it, and switches back when told", async () => {
    const server = await upstream("vllm", { tokenField: "max_completion_tokens" });
    const engine = await engineFor(server);
    assert.equal(engine.tokenLimitField, "max_tokens");
    const first = await collect(engine, { maxTokens: 5 });
    assert.equal(first.done?.finishReason, "length");
    const fields = () => server.chatRequests().map((r) => ("max_tokens" in r.body! ? "max_tokens" : "max_completion_tokens"));
    assert.deepEqual(fields(), ["max_tokens", "max_completion_tokens"]);
    assert.equal(server.chatRequests()[1]!.body!.max_completion_tokens, 5);
    assert.equal(engine.tokenLimitField, "max_completion_tokens");

    await collect(engine, {});
    assert.deepEqual(fields(), ["max_tokens", "max_completion_tokens", "max_completion_tokens"], "no second rejection");

    // The upstream was swapped for one that only knows max_tokens, and says so FastAPI-style.
    server.behaviour.tokenField = "max_tokens";
    server.behaviour.errorShape = "detail-list";
    const back = await collect(engine, {});
    assert.equal(back.text, REPLY.join(""));
    assert.equal(engine.tokenLimitField, "max_tokens");
    assert.deepEqual(fields().slice(3), ["max_completion_tokens", "max_tokens"]);
  });
});

describe("upstream failures", () => {
  it("error bodies of every shape become an UpstreamError with the status and the message", async () => {
    for (const errorShape of ["openai", "vllm-legacy", "string", "detail", "detail-list", "text"] as const) {
      const server = await upstream("vllm", { errorShape });
      const engine = await engineFor(server, { model: "nope/missing", contextWindow: 4096 });
      await assert.rejects(collect(engine, {}), (e: unknown) => {
        return e instanceof UpstreamError && e.status === 404 && e.message.includes("The model `nope/missing` does not exist.");
      }, errorShape);
    }
    const ollama = await upstream("ollama");
    const engine = await engineFor(ollama, { model: "nope", contextWindow: 4096 });
    await assert.rejects(collect(engine, {}), (e: unknown) => {
      return e instanceof UpstreamError && e.status === 404 && e.message === 'model "nope" not found, try pulling it first';
    });
  });

  it("rejects with the count's figures when the prompt plus max_tokens exceed the window", async () => {
    const server = await upstream("vllm", { contextWindow: 64 });
    const engine = await engineFor(server);
    const prompt = await engine.countPromptTokens(MESSAGES);
    const maxTokens = 64 - prompt + 1;
    await assert.rejects(collect(engine, { messages: MESSAGES, maxTokens }), (e: unknown) => {
      return e instanceof ContextLengthExceededError && e.promptTokens === prompt && e.maxTokens === maxTokens && e.contextWindow === 64;
    });
    const fits = await collect(engine, { messages: MESSAGES, maxTokens: maxTokens - 1 });
    assert.equal(fits.done?.usage.promptTokens, prompt);
  });

  it("asks the upstream's tokenizer while the chat request is on its way, not before it", async () => {
    // The count answers after 500 ms; the chat request must reach the upstream well before that.
    const server = await upstream("vllm", { tokenizeDelayMs: 500 });
    const engine = await engineFor(server);
    const generation = collect(engine, { messages: MESSAGES, maxTokens: 8 });
    const deadline = Date.now() + 400;
    while (server.chatRequests().length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    assert.equal(server.chatRequests().length, 1, "the chat request was sent while the prompt was being counted");
    const { done } = await generation;
    assert.equal(done?.usage.promptTokens, server.promptTokens(MESSAGES));
  });

  it("asks the upstream to count each distinct prompt once, callers at once sharing the request, and again after a failed count", async () => {
    const server = await upstream("vllm");
    const engine = await engineFor(server);
    const tokenizes = () => server.requests.filter((r) => r.path === "/tokenize").length;
    const before = tokenizes();
    // A gateway counts the prompt on the worker, then sends it the job.
    const counted = await engine.countPromptTokens(MESSAGES);
    const { done } = await collect(engine, { messages: MESSAGES, maxTokens: 8 });
    assert.equal(done?.usage.promptTokens, counted);
    assert.equal(tokenizes(), before + 1, "the job's count was the one already asked");

    const other: ChatMessage[] = [{ role: "user", content: "Something else" }];
    const [first, second] = await Promise.all([engine.countPromptTokens(other), engine.countPromptTokens(other)]);
    assert.deepEqual([first, second], [server.promptTokens(other), server.promptTokens(other)]);
    assert.equal(tokenizes(), before + 2, "two callers at once, one request");

    const third: ChatMessage[] = [{ role: "user", content: "A third prompt" }];
    server.behaviour.tokenizer = false;
    await assert.rejects(engine.countPromptTokens(third));
    server.behaviour.tokenizer = true;
    assert.equal(await engine.countPromptTokens(third), server.promptTokens(third), "the failure was not kept");
  });

  it("never sends a prompt that its local estimate (no tokenizer) finds too long", async () => {
    const server = await upstream("vllm", { contextWindow: 64, tokenizer: false });
    const engine = await engineFor(server);
    const estimate = estimatePromptTokens(MESSAGES);
    await assert.rejects(collect(engine, { messages: MESSAGES, maxTokens: 64 - estimate + 1 }), ContextLengthExceededError);
    assert.equal(server.chatRequests().length, 0);
  });

  it("the server's own context rejection, when the estimate was low, becomes ContextLengthExceededError with its numbers", async () => {
    // Words of one letter cost this tokenizer a token per two bytes, more than the estimate allows.
    const vllm = await upstream("vllm", { contextWindow: 200, tokenizer: false });
    const vllmEngine = await engineFor(vllm);
    assert.equal(vllmEngine.tokenCounting, "estimate");
    const words: ChatMessage[] = [{ role: "user", content: "a ".repeat(150).trim() }];
    const estimate = estimatePromptTokens(words);
    const actual = vllm.promptTokens(words);
    assert.ok(actual > estimate);
    await assert.rejects(collect(vllmEngine, { messages: words, maxTokens: 200 - estimate }), (e: unknown) => {
      return e instanceof ContextLengthExceededError && e.promptTokens === actual && e.maxTokens === 200 - estimate && e.contextWindow === 200;
    });

    // llama-server rejects a prompt that fills its context, and says so in fields.
    const llama = await upstream("llama-server", { contextWindow: 100, tokenizer: false });
    const llamaEngine = await engineFor(llama);
    const bangs: ChatMessage[] = [{ role: "user", content: "!".repeat(95) }];
    assert.ok(llama.promptTokens(bangs) >= 100 && estimatePromptTokens(bangs) < 90);
    const isOverflow = (e: unknown) => e instanceof ContextLengthExceededError && e.promptTokens === llama.promptTokens(bangs) && e.contextWindow === 100;
    await assert.rejects(collect(llamaEngine, { messages: bangs, maxTokens: 10 }), isOverflow);
    // Older builds answer 200 and put the rejection in the stream; nothing was generated either way.
    llama.behaviour.contextErrorInStream = true;
    await assert.rejects(collect(llamaEngine, { messages: bangs, maxTokens: 10 }), isOverflow);
  });

  it("a failure after streaming began throws after the deltas already given", async () => {
    const cases: Array<[Dialect, Partial<UpstreamBehaviour>, (e: unknown) => boolean]> = [
      ["vllm", { failAfter: { chunks: 2, how: "error-event" } }, (e) => e instanceof UpstreamError && e.status === 500 && /CUDA error/.test(e.message)],
      ["vllm", { failAfter: { chunks: 2, how: "error-event" }, errorShape: "vllm-legacy" }, (e) => e instanceof UpstreamError && e.status === 500 && /CUDA error/.test(e.message)],
      ["llama-server", { failAfter: { chunks: 2, how: "error-event" } }, (e) => e instanceof UpstreamError && e.code === "server_error" && /CUDA error/.test(e.message)],
      ["ollama", { failAfter: { chunks: 2, how: "drop" } }, (e) => e instanceof UpstreamError && e.status === null && /failed/.test(e.message)],
      ["vllm", { failAfter: { chunks: 2, how: "end" } }, (e) => e instanceof UpstreamError && /ended before the generation finished/.test(e.message)],
      ["vllm", { finishReasons: { stop: "abort", length: "length" } }, (e) => e instanceof UpstreamError && /finish_reason "abort"/.test(e.message)],
    ];
    for (const [dialect, behaviour, matches] of cases) {
      const server = await upstream(dialect, behaviour);
      const { deltas, error } = await deltasUntilFailure(await engineFor(server), {});
      const label = `${dialect} ${JSON.stringify(behaviour)}`;
      assert.ok(matches(error), `${label}: ${String(error)}`);
      if (behaviour.failAfter) assert.deepEqual(deltas, REPLY.slice(0, 2), label);
    }
  });

  it("an upstream that goes quiet fails after timeoutMs and loses the connection", async () => {
    const server = await upstream("vllm", { stall: true });
    const engine = await engineFor(server, { timeoutMs: 300 });
    const started = Date.now();
    await assert.rejects(collect(engine, {}), (e: unknown) => e instanceof UpstreamError && e.status === null && /sent nothing for 300 ms/.test(e.message));
    const elapsed = Date.now() - started;
    assert.ok(elapsed >= 290 && elapsed < 2000, `timed out after ${elapsed} ms`);
    assert.equal(await server.chatRequests()[0]!.disconnected, true);
  });
});

describe("the end of a stream", () => {
  it("a response that ends a write after its [DONE] leaves its connection for the next request", async () => {
    // Split writes: the response's end comes about a millisecond after [DONE], which ends the generation.
    const server = await upstream("vllm", { splitWrites: true });
    const engine = await engineFor(server);
    for (let i = 0; i < 4; i++) {
      assert.equal((await collect(engine, {})).text, REPLY.join(""));
      assert.equal(await server.chatRequests()[i]!.disconnected, false, "the upstream sent its whole answer");
      // The end is read in the background; given time, the connection is back in the pool.
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const ports = server.chatRequests().map((c) => c.clientPort);
    assert.equal(new Set(ports.slice(1)).size, 1, `the chats' client ports: ${ports.join(", ")}`);
  });

  it("a response held open after [DONE]: the generation ends at [DONE], and its connection is dropped", async () => {
    const server = await upstream("vllm", { holdAfterDone: true });
    const engine = await engineFor(server, { timeoutMs: 60_000 });
    const r = await collect(engine, {});
    const doneAt = Date.now();
    assert.equal(r.text, REPLY.join(""));
    assert.equal(r.done?.finishReason, "stop");
    assert.equal(await server.chatRequests()[0]!.disconnected, true);
    const heldMs = Date.now() - doneAt;
    assert.ok(heldMs >= RELEASE_GRACE_MS - 50 && heldMs < 10_000, `the connection was dropped ${heldMs} ms after the answer`);
  });
});

describe("abort and close", () => {
  const endless: Partial<UpstreamBehaviour> = { loop: true, pieceDelayMs: 10 };

  it("aborting mid-stream ends the iterator without done and drops the upstream request at once", async () => {
    const server = await upstream("vllm", endless);
    const engine = await engineFor(server);
    const controller = new AbortController();
    let abortedAt = 0;
    const r = await collect(engine, { maxTokens: 4000 }, controller.signal, (count) => {
      if (count === 3) {
        abortedAt = Date.now();
        controller.abort();
      }
    });
    assert.equal(r.done, undefined);
    assert.deepEqual(r.deltas, REPLY.slice(0, 3));
    assert.equal(await server.chatRequests()[0]!.disconnected, true);
    const latency = Date.now() - abortedAt;
    assert.ok(latency < 500, `the upstream saw the disconnect ${latency} ms after the abort`);

    // Aborted before the answer starts: also no done and no error.
    const stalled = await upstream("vllm", { stall: true });
    const early = new AbortController();
    setTimeout(() => early.abort(), 50);
    const none = await collect(await engineFor(stalled), {}, early.signal);
    assert.deepEqual(none, { text: "", deltas: [], done: undefined });
    assert.equal(await stalled.chatRequests()[0]!.disconnected, true);
  });

  it("many generations at once are no listener leak: no MaxListenersExceededWarning, every one finishes", async () => {
    const server = await upstream("vllm");
    const engine = await engineFor(server);
    const warnings: string[] = [];
    const onWarning = (w: Error) => warnings.push(w.name);
    process.on("warning", onWarning);
    try {
      const results = await Promise.all(Array.from({ length: 40 }, () => collect(engine, {})));
      assert.ok(results.every((r) => r.done !== undefined), "all 40 finished");
      await new Promise((r) => setImmediate(r));
      assert.deepEqual(warnings.filter((n) => n === "MaxListenersExceededWarning"), []);
    } finally {
      process.off("warning", onWarning);
    }
  });

  it("close() fails in-flight generations, drops their requests and refuses new work", async () => {
    const server = await upstream("llama-server", endless);
    const engine = await engineFor(server);
    const running = collect(engine, { maxTokens: 2000 }, undefined, (count) => {
      if (count === 2) void engine.close();
    });
    await assert.rejects(running, /the engine is closed/);
    assert.equal(await server.chatRequests()[0]!.disconnected, true);
    await assert.rejects(collect(engine, {}), /the engine is closed/);
    await assert.rejects(engine.countPromptTokens(MESSAGES), /the engine is closed/);
  });
});
