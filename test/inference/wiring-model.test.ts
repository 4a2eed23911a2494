import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { readGgufFileInfo } from "node-llama-cpp";
import { WIRING_MODEL, WIRING_MODEL_ID } from "../../src/catalog/catalog.ts";
import { LlamaEngine } from "../../src/inference/llama-engine.ts";
import {
  buildWiringModel,
  ensureWiringModel,
  expectedPenalizedReply,
  KNOWN_REPLY,
  knownReplyPrefix,
  LOOP_UNIT,
  loopText,
  PENALTY_ENDING,
  WIRING_MODEL_FILE_NAME,
  TRIGGER_WORD,
} from "../../src/inference/wiring-model.ts";
import { collect } from "./collect.ts";

describe("wiring model", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "wiring-model-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  // How fast it builds is printed, not asserted: a shared 2-core machine makes timings noisy.
  it("builds the same bytes every time, a few hundred KB", () => {
    const start = performance.now();
    const bytes = buildWiringModel();
    console.log(`wiring model: ${bytes.length} bytes built in ${(performance.now() - start).toFixed(1)} ms`);
    assert.deepEqual(buildWiringModel(), bytes);
    assert.ok(bytes.length > 100_000 && bytes.length < 1_000_000, `size ${bytes.length}`);
  });

  it("is a llama-architecture GGUF with the metadata llama.cpp needs", async () => {
    const file = await ensureWiringModel(dir);
    const info = await readGgufFileInfo(file, { logWarnings: false });
    const { general, llama, tokenizer } = info.metadata as unknown as {
      general: Record<string, unknown>;
      llama: Record<string, unknown>;
      tokenizer: { ggml: Record<string, unknown>; chat_template: string };
    };
    assert.equal(general.architecture, "llama");
    assert.equal(general.name, WIRING_MODEL_ID);
    assert.equal(llama.context_length, WIRING_MODEL.contextWindow);
    assert.equal(llama.embedding_length, 64);
    assert.equal(llama.block_count, 2);
    assert.equal(tokenizer.ggml.model, "llama");
    const tokens = tokenizer.ggml.tokens as string[];
    assert.ok(tokens.length > 256 && tokens.length < 1000);
    assert.equal(tokens[Number(tokenizer.ggml.eos_token_id)], "<|im_end|>");
    for (let b = 0; b < 256; b++) assert.ok(tokens.includes(`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`));
    assert.ok(tokens.includes("▁banana"));
    assert.match(tokenizer.chat_template, /<\|im_start\|>/);
    assert.equal(info.tensorInfo!.length, 2 + 9 * 2 + 1);
  });

  it("writes the file only when missing or different, atomically", async () => {
    const file = await ensureWiringModel(dir);
    assert.equal(file, path.join(dir, WIRING_MODEL_FILE_NAME));
    const first = await stat(file);
    await new Promise((r) => setTimeout(r, 20));
    await ensureWiringModel(dir);
    assert.equal((await stat(file)).mtimeMs, first.mtimeMs, "an identical file is left alone");

    await writeFile(file, "stale");
    await ensureWiringModel(dir);
    assert.deepEqual(new Uint8Array(await readFile(file)), buildWiringModel());

    const nested = path.join(dir, "a", "b");
    assert.equal(await ensureWiringModel(nested), path.join(nested, WIRING_MODEL_FILE_NAME));
  });

  it("exports the texts tests assert against", () => {
    assert.equal(KNOWN_REPLY, "Hello from the svc wiring model.");
    assert.equal(knownReplyPrefix(3), "Hello from the");
    assert.equal(loopText(3), " banana banana banana");
    assert.equal(expectedPenalizedReply(1, 0), LOOP_UNIT + PENALTY_ENDING);
    assert.equal(expectedPenalizedReply(0, 0.2), loopText(3) + PENALTY_ENDING);
    assert.equal(expectedPenalizedReply(0.5, 0.1), loopText(1) + PENALTY_ENDING);
    assert.equal(expectedPenalizedReply(0.3, 0), null);
    assert.equal(expectedPenalizedReply(-1, 0), null);
  });

  it("gives its sentence at temperature 2 and any top_p, and samples only between the loop and its way out", async () => {
    // A newcomer's first request uses OpenAI's defaults (temperature 1, top_p 1); the reply must
    // read as designed even at the highest temperature the API accepts.
    const engine = await LlamaEngine.load({ modelPath: await ensureWiringModel(dir), threads: 1 });
    try {
      const sampled = async (content: string, seed: number, topP: number) =>
        (await collect(engine, { messages: [{ role: "user", content }], temperature: 2, topP, seed, maxTokens: 16 })).text;
      const off: string[] = [];
      for (let seed = 1; seed <= 40; seed++) {
        const text = await sampled("Hello", seed, seed % 2 === 0 ? 1 : 0.5);
        if (text !== KNOWN_REPLY) off.push(`seed ${seed}: ${JSON.stringify(text)}`);
      }
      assert.deepEqual(off, [], "every reply at temperature 2 is the sentence");

      const loops = new Set<string>();
      for (let seed = 1; seed <= 10; seed++) loops.add(await sampled(`Say ${TRIGGER_WORD}`, seed, 1));
      for (const text of loops) assert.match(text, /^( banana)*( split!)?$/, "no stray tokens in the trigger loop either");
      assert.ok(loops.size >= 2, "the loop's way out is a real choice for a sampler");
    } finally {
      await engine.close();
    }
  });
});
