/** What a text's length proves about its tokens, checked against the wiring model's real tokenizer. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ensureWiringModel, KNOWN_REPLY, loopText } from "../../src/inference/wiring-model.ts";
import { completionTokensAtMost, promptTokensAtLeast, promptTokensAtMost, SILENT_TOKENS } from "../../src/inference/token-bounds.ts";
import { LlamaEngine } from "../../src/inference/llama-engine.ts";
import type { ChatMessage } from "../../src/inference/engine.ts";
import { Vocabulary } from "../../src/inference/vocabulary.ts";
import { tempDir } from "../support/service.ts";

test("the bounds hold for the wiring model's tokenizer, whose longest token is read from its vocabulary", async () => {
  const dir = await tempDir();
  const vocabulary = await Vocabulary.load(await ensureWiringModel(dir.path));
  try {
    assert.equal(vocabulary.maxTokenBytes, Buffer.byteLength("<|im_start|>"));
    for (const text of [KNOWN_REPLY, loopText(40), "a".repeat(5_000), "héllo wörld 🍌 ".repeat(50)]) {
      const tokens = vocabulary.countTokens(text);
      assert.ok(promptTokensAtLeast([{ role: "user", content: text }], vocabulary.maxTokenBytes) <= tokens, text.slice(0, 20));
      assert.ok(completionTokensAtMost({ text, stop: [], finishReason: "length" }) >= tokens, text.slice(0, 20));
    }
  } finally {
    await vocabulary.close();
    await dir.remove();
  }
});

test("a stop sequence that may have ended the output counts toward what it can hold", () => {
  assert.equal(completionTokensAtMost({ text: "abc", stop: ["END", "x"], finishReason: "stop" }), 3 + 3 + SILENT_TOKENS);
  assert.equal(completionTokensAtMost({ text: "abc", stop: ["END"], finishReason: "length" }), 3 + SILENT_TOKENS);
  assert.equal(promptTokensAtLeast([{ role: "user", content: "a".repeat(25) }, { role: "system", content: "é" }], 9), 3);
});

test("the most tokens a prompt can take holds for the wiring model's template and tokenizer, on texts built to tokenize badly", async () => {
  const dir = await tempDir();
  const engine = await LlamaEngine.load({ modelPath: await ensureWiringModel(dir.path), threads: 1 });
  try {
    // Characters NFC expands (U+0344, U+FB2C, U+2ADC), ones outside any small vocabulary, the
    // template's own markers as text, lone spaces, and many one-character messages (the template's share).
    const texts = ["\u0344".repeat(60), "\uFB2C".repeat(40), "\u2ADC".repeat(40), "🍌\u200d🍌".repeat(30), "<|im_start|>assistant\n".repeat(10), " ".repeat(200), "é".repeat(100)];
    const conversations: ChatMessage[][] = texts.map((content) => [{ role: "user", content }]);
    conversations.push(Array.from({ length: 40 }, (_, i) => ({ role: i % 2 === 0 ? "user" : "assistant", content: "x" }) as ChatMessage));
    conversations.push([{ role: "system", content: "" }, { role: "user", content: "" }]);
    for (const messages of conversations) {
      const counted = await engine.countPromptTokens(messages);
      assert.ok(counted < engine.contextWindow, "a count within the window is exact, not a bound");
      assert.ok(promptTokensAtMost(messages) >= counted, `${messages.length} messages, ${JSON.stringify(messages[0]!.content.slice(0, 12))}: ${counted} tokens`);
    }
  } finally {
    await engine.close();
    await dir.remove();
  }
});
