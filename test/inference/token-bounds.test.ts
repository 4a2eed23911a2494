/** What a text's length proves about its tokens, checked against the wiring model's real tokenizer. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { ensureWiringModel, KNOWN_REPLY, loopText } from "../../src/inference/wiring-model.ts";
import { completionTokensAtMost, promptTokensAtLeast, SILENT_TOKENS } from "../../src/inference/token-bounds.ts";
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
