/**
 * The llama.cpp engine on the project's own wiring model: real inference, no mocks. The model's
 * designed behaviours (wiring-model.ts) make every assertion exact.
 */
import assert from "node:assert/strict";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import type { LlamaModel } from "node-llama-cpp";
import { WIRING_MODEL } from "../../src/catalog/catalog.ts";
import type { ChatMessage } from "../../src/inference/engine.ts";
import { ContextLengthExceededError, LlamaEngine, sharedLlama } from "../../src/inference/llama-engine.ts";
import {
  ensureWiringModel,
  expectedPenalizedReply,
  KNOWN_REPLY,
  KNOWN_REPLY_PIECES,
  knownReplyPrefix,
  loopText,
  TRIGGER_WORD,
} from "../../src/inference/wiring-model.ts";
import { baseRequest, collect } from "./collect.ts";

const MODEL_DIR = path.join(os.tmpdir(), "svc-inference-tests");

/**
 * `count` requests at once: the even ones get the known reply, the odd ones name the trigger word
 * and loop for `loopTokens(i)` tokens.
 */
function sentenceAndLoopRequests(engine: LlamaEngine, count: number, loopTokens: (i: number) => number) {
  return Promise.all(
    Array.from({ length: count }, (_, i) =>
      i % 2 === 0
        ? collect(engine, { messages: [{ role: "user", content: `Request ${i}` }] })
        : collect(engine, { messages: [{ role: "user", content: `Request ${i}: ${TRIGGER_WORD}` }], maxTokens: loopTokens(i) }),
    ),
  );
}

describe("LlamaEngine on the wiring model", () => {
  let modelPath: string;
  let engine: LlamaEngine;

  before(async () => {
    modelPath = await ensureWiringModel(MODEL_DIR);
    engine = await LlamaEngine.load({ modelPath, threads: 1 });
  });
  after(async () => {
    await engine.close();
  });

  it("serves the model's context window through its ChatML template", () => {
    assert.equal(engine.contextWindow, WIRING_MODEL.contextWindow);
    assert.equal(engine.chatWrapperName, "ChatML");
    assert.equal(engine.maxSequences, 8);
  });

  it("replies with the known sentence at temperature 0, streamed token by token", async () => {
    const r = await collect(engine, {});
    assert.equal(r.text, KNOWN_REPLY);
    assert.deepEqual(r.deltas, [...KNOWN_REPLY_PIECES]);
    assert.equal(r.done?.finishReason, "stop");
    assert.equal(r.done?.usage.completionTokens, KNOWN_REPLY_PIECES.length);
  });

  it("switches to the loop when the trigger is in the system message", async () => {
    const r = await collect(engine, {
      messages: [
        { role: "system", content: `You are fond of the word ${TRIGGER_WORD}.` },
        { role: "user", content: "Hi" },
      ],
      maxTokens: 12,
    });
    assert.equal(r.text, loopText(12));
    assert.equal(r.done?.finishReason, "length");
    assert.equal(r.done?.usage.completionTokens, 12);

    const far = await collect(engine, {
      messages: [
        { role: "system", content: TRIGGER_WORD },
        { role: "user", content: "x ".repeat(800) },
      ],
      maxTokens: 4,
    });
    assert.ok(far.done!.usage.promptTokens > 1600, "the trigger is ~1,600 tokens back");
    assert.equal(far.text, loopText(4));
  });

  it("switches to the loop when the trigger is in any user turn", async () => {
    const earlier = await collect(engine, {
      messages: [
        { role: "user", content: `I ate ${TRIGGER_WORD}s for breakfast.` },
        { role: "assistant", content: KNOWN_REPLY },
        { role: "user", content: "And what about lunch?" },
      ],
      maxTokens: 5,
    });
    assert.equal(earlier.text, loopText(5));
    const latest = await collect(engine, { messages: [{ role: "user", content: TRIGGER_WORD }], maxTokens: 3 });
    assert.equal(latest.text, loopText(3));
  });

  it("cuts the reply at max_tokens with finish_reason length", async () => {
    const r = await collect(engine, { maxTokens: 3 });
    assert.equal(r.text, knownReplyPrefix(3));
    assert.equal(r.done?.finishReason, "length");
    assert.equal(r.done?.usage.completionTokens, 3);
  });

  it("ends at a stop sequence and leaves it out of the text", async () => {
    const r = await collect(engine, { stop: ["wiring"] });
    assert.equal(r.text, "Hello from the svc ");
    assert.equal(r.done?.finishReason, "stop");
    // The tokens that spelled the stop sequence were generated, so they are counted.
    assert.equal(r.done?.usage.completionTokens, 5);

    const either = await collect(engine, { stop: ["nowhere", " the"] });
    assert.equal(either.text, "Hello from");
    const inLoop = await collect(engine, {
      messages: [{ role: "user", content: TRIGGER_WORD }],
      stop: ["na ba"],
    });
    assert.equal(inLoop.text, " bana", "a stop sequence may end or start inside a token");
    assert.equal(inLoop.done?.usage.completionTokens, 2);
  });

  it("breaks the loop with a presence or frequency penalty, and only then", async () => {
    const messages: ChatMessage[] = [{ role: "user", content: `Say ${TRIGGER_WORD}.` }];
    for (const [presencePenalty, frequencyPenalty] of [
      [1, 0],
      [2, 0],
      [0, 0.2],
      [0, 0.1],
      [0.3, 0.1],
    ] as const) {
      const r = await collect(engine, { messages, presencePenalty, frequencyPenalty, maxTokens: 40 });
      const label = `presence ${presencePenalty}, frequency ${frequencyPenalty}`;
      assert.equal(r.text, expectedPenalizedReply(presencePenalty, frequencyPenalty), label);
      assert.equal(r.done?.finishReason, "stop");
    }
    for (const [presencePenalty, frequencyPenalty] of [
      [0.3, 0],
      [-1, 0],
      [0, -0.5],
    ] as const) {
      assert.equal(expectedPenalizedReply(presencePenalty, frequencyPenalty), null);
      const r = await collect(engine, { messages, presencePenalty, frequencyPenalty, maxTokens: 20 });
      assert.equal(r.text, loopText(20), `${presencePenalty}/${frequencyPenalty} keeps looping`);
      assert.equal(r.done?.finishReason, "length");
    }
    const plain = await collect(engine, { presencePenalty: 2, frequencyPenalty: 2 });
    assert.equal(plain.text, KNOWN_REPLY, "a reply without repeats is unaffected");
  });

  it("samples reproducibly per seed, and differently across seeds", async () => {
    // The plain sentence is near-certain at any temperature, so sampling is observed where the
    // model offers a real choice: the trigger loop against its way out, LOOP_MARGIN apart.
    const messages: ChatMessage[] = [{ role: "user", content: TRIGGER_WORD }];
    const sample = async (seed: number) => (await collect(engine, { messages, temperature: 1, seed, maxTokens: 16 })).text;
    const texts: string[] = [];
    for (let seed = 1; seed <= 8; seed++) texts.push(await sample(seed));
    for (const seed of [1, 5, 8]) assert.equal(await sample(seed), texts[seed - 1], `seed ${seed} repeats`);
    assert.ok(new Set(texts).size >= 2, `8 seeds gave ${new Set(texts).size} distinct texts`);
    for (const text of texts) assert.match(text, /^( banana)*( split!)?$/, "temperature 1 stays on the model's two paths");
    const greedy = await collect(engine, { messages, temperature: 0, seed: 3, maxTokens: 16 });
    assert.equal(greedy.text, loopText(16), "a seed does not matter at temperature 0");
  });

  describe("prompt tokens", () => {
    let model: LlamaModel;
    before(async () => {
      model = await (await sharedLlama()).loadModel({ modelPath });
    });
    after(async () => {
      await model.dispose();
    });

    const chatml = (messages: ChatMessage[]) =>
      "<s>" +
      messages.map((m) => `<|im_start|>${m.role}\n${m.content}<|im_end|>\n`).join("") +
      "<|im_start|>assistant\n";

    it("counts the ChatML-rendered conversation, generation prefix included, as usage reports it", async () => {
      const conversations: ChatMessage[][] = [
        [{ role: "user", content: "Hi" }],
        [
          { role: "system", content: "Be brief." },
          { role: "user", content: "What is a banana split?" },
          { role: "assistant", content: "A dessert." },
          { role: "user", content: "ünïcödé and emoji 🍌 too" },
        ],
      ];
      for (const messages of conversations) {
        const counted = await engine.countPromptTokens(messages);
        assert.equal(counted, model.tokenize(chatml(messages), true).length);
        const r = await collect(engine, { messages, maxTokens: 2 });
        assert.equal(r.done?.usage.promptTokens, counted);
      }
      assert.equal(await engine.countPromptTokens([{ role: "user", content: "Hi" }]), 11);
    });
  });

  it("rejects a request that cannot fit the context window before generating anything", async () => {
    const messages: ChatMessage[] = [{ role: "user", content: "Hi" }];
    const promptTokens = await engine.countPromptTokens(messages);
    const events: unknown[] = [];
    await assert.rejects(
      (async () => {
        for await (const e of engine.generate({
          ...baseRequest,
          messages,
          maxTokens: WIRING_MODEL.contextWindow - promptTokens + 1,
        }))
          events.push(e);
      })(),
      (err: unknown) => {
        assert.ok(err instanceof ContextLengthExceededError);
        assert.equal(err.promptTokens, promptTokens);
        assert.equal(err.contextWindow, WIRING_MODEL.contextWindow);
        return true;
      },
    );
    assert.deepEqual(events, []);
    const huge = [{ role: "user" as const, content: "word ".repeat(WIRING_MODEL.contextWindow) }];
    await assert.rejects(collect(engine, { messages: huge, maxTokens: 1 }), ContextLengthExceededError);
  });

  it("generates right up to a small configured window, and no further", async () => {
    const small = await LlamaEngine.load({ modelPath, threads: 1, contextSize: 200, maxSequences: 1 });
    try {
      assert.equal(small.contextWindow, 200);
      const messages: ChatMessage[] = [{ role: "user", content: TRIGGER_WORD }];
      const room = 200 - (await small.countPromptTokens(messages));
      const r = await collect(small, { messages, maxTokens: room });
      assert.equal(r.text, loopText(room));
      await assert.rejects(collect(small, { messages, maxTokens: room + 1 }), ContextLengthExceededError);
    } finally {
      await small.close();
    }
  });

  it("stops promptly when aborted, ends with a done counting what it generated, and frees the sequence", async () => {
    const single = await LlamaEngine.load({ modelPath, threads: 1, maxSequences: 1 });
    try {
      const messages: ChatMessage[] = [{ role: "user", content: TRIGGER_WORD }];
      const ac = new AbortController();
      let abortedAt = 0;
      const r = await collect(single, { messages, maxTokens: 2000 }, ac.signal, (n) => {
        if (n === 3) {
          abortedAt = performance.now();
          ac.abort();
        }
      });
      const stoppedAfter = performance.now() - abortedAt;
      // The output generated before the stop took hold still comes out, and `done` counts exactly it.
      assert.equal(r.done?.finishReason, "cancelled");
      const generated = r.done!.usage.completionTokens;
      assert.ok(generated >= 3 && generated < 2000, `${generated} tokens generated`);
      assert.equal(r.text, loopText(generated));
      assert.ok(stoppedAfter < 250, `stopped ${stoppedAfter} ms after the abort`);

      // A request waiting for the only sequence can give up too.
      const hold = new AbortController();
      let holding: () => void = () => undefined;
      const heldFirstToken = new Promise<void>((resolve) => (holding = resolve));
      const holder = collect(single, { messages, maxTokens: 2000 }, hold.signal, () => holding());
      await heldFirstToken;
      const waitAbort = new AbortController();
      const waiter = collect(single, {}, waitAbort.signal);
      setTimeout(() => waitAbort.abort(), 20);
      assert.deepEqual(await waiter, { text: "", deltas: [], done: undefined }, "no output, no done");
      hold.abort();
      assert.equal((await holder).done?.finishReason, "cancelled");

      // Leaving the loop early frees the sequence as well.
      for await (const event of single.generate({ ...baseRequest, messages, maxTokens: 2000 })) {
        assert.equal(event.type, "delta");
        break;
      }
      const after = await collect(single, {});
      assert.equal(after.text, KNOWN_REPLY, "the one sequence is free again");
    } finally {
      await single.close();
    }
  });

  it("close() fails waiting and running requests and refuses new ones", async () => {
    const closing = await LlamaEngine.load({ modelPath, threads: 1, maxSequences: 1 });
    // Settled into values right away: both fail during close(), before anything awaits them.
    const outcome = (p: Promise<unknown>) => p.then(() => "finished", (err: Error) => err.message);
    const running = outcome(collect(closing, { messages: [{ role: "user", content: TRIGGER_WORD }], maxTokens: 2000 }));
    const waiting = outcome(collect(closing, {}));
    await new Promise((resolve) => setTimeout(resolve, 20));
    await closing.close();
    assert.equal(await running, "the engine is closed");
    assert.equal(await waiting, "the engine is closed");
    await assert.rejects(collect(closing, {}), /closed/);
  });

  it("serves 16 concurrent requests on one context, each with its own answer", async () => {
    const start = performance.now();
    const results = await sentenceAndLoopRequests(engine, 16, (i) => 10 + i);
    const ms = performance.now() - start;
    results.forEach((r, i) => {
      const [text, tokens] = i % 2 === 0 ? [KNOWN_REPLY, KNOWN_REPLY_PIECES.length] : [loopText(10 + i), 10 + i];
      assert.equal(r.text, text, `request ${i}`);
      assert.equal(r.done?.usage.completionTokens, tokens, `request ${i}`);
    });
    const tokens = results.reduce((n, r) => n + (r.done?.usage.completionTokens ?? 0), 0);
    const rate = ((tokens / ms) * 1000).toFixed(0);
    console.log(`16 concurrent requests: ${tokens} tokens in ${ms.toFixed(0)} ms (${rate} tok/s overall)`);
  });

  it("never gives one sequence another's token, round after round on a full context", async () => {
    // Each batch mixes prompts with decodes, so llama.cpp reorders its output rows, which raced
    // in node-llama-cpp 3.21 (batch-sampling-guard.ts). Without the guard, each of 6 runs of this
    // test failed, first at rounds 2 to 21.
    const full = await LlamaEngine.load({ modelPath, threads: 1, maxSequences: 32 });
    try {
      for (let round = 0; round < 60; round++) {
        const results = await sentenceAndLoopRequests(full, 32, (i) => 4 + (i % 8));
        results.forEach((r, i) => {
          assert.equal(r.text, i % 2 === 0 ? KNOWN_REPLY : loopText(4 + (i % 8)), `round ${round}, request ${i}`);
        });
      }
    } finally {
      await full.close();
    }
  });

  it("reports its speed (time to first token, tokens/s)", async () => {
    const messages: ChatMessage[] = [{ role: "user", content: TRIGGER_WORD }];
    const start = performance.now();
    let first = 0;
    const r = await collect(engine, { messages, maxTokens: 500 }, undefined, (n) => {
      if (n === 1) first = performance.now();
    });
    const end = performance.now();
    const tps = ((r.done!.usage.completionTokens - 1) / (end - first)) * 1000;
    console.log(`one request: first token after ${(first - start).toFixed(1)} ms, then ${tps.toFixed(0)} tok/s`);
    assert.equal(r.done?.usage.completionTokens, 500);
  });
});
