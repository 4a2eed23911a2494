import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { GenerationRequest } from "../../src/inference/engine.ts";
import { toLlamaSampling, toUint32Seed } from "../../src/inference/llama-sampling.ts";

const request: GenerationRequest = {
  messages: [{ role: "user", content: "hi" }],
  maxTokens: 100,
  temperature: 1,
  topP: 1,
  stop: [],
  frequencyPenalty: 0,
  presencePenalty: 0,
};

describe("OpenAI sampling mapped onto node-llama-cpp", () => {
  it("uses OpenAI's semantics, not node-llama-cpp's defaults", () => {
    const s = toLlamaSampling({ ...request, temperature: 0.7, topP: 0.9, seed: 5 });
    assert.equal(s.temperature, 0.7);
    assert.equal(s.topK, 0, "top-k off");
    assert.equal(s.topP, 0.9);
    assert.equal(s.seed, 5);
    assert.equal(s.repeatPenalty, false, "no penalties asked for, none applied");
  });

  it("draws a fresh seed per request when none is given", () => {
    const seeds = new Set(Array.from({ length: 5 }, () => toLlamaSampling(request).seed));
    assert.ok(seeds.size > 1);
    for (const seed of seeds) assert.ok(Number.isInteger(seed) && seed >= 0 && seed < 2 ** 32);
  });

  it("folds any integer seed into llama.cpp's uint32", () => {
    assert.equal(toUint32Seed(0), 0);
    assert.equal(toUint32Seed(2 ** 32 + 3), 3);
    assert.equal(toUint32Seed(-1), 2 ** 32 - 1);
    assert.notEqual(toUint32Seed(-1), toUint32Seed(1));
  });

  it("passes presence and frequency penalties through as additive logit penalties", () => {
    const s = toLlamaSampling({ ...request, presencePenalty: 0.5, frequencyPenalty: -0.25, maxTokens: 300 });
    assert.deepEqual(s.repeatPenalty, {
      penalty: 1,
      presencePenalty: 0.5,
      frequencyPenalty: -0.25,
      lastTokens: 300,
      penalizeNewLine: true,
    });
  });
});
