import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { after, before, describe, it } from "node:test";
import { readGgufFileInfo } from "node-llama-cpp";
import {
  buildTestModel,
  ensureTestModel,
  expectedPenalizedReply,
  KNOWN_REPLY,
  knownReplyPrefix,
  LOOP_UNIT,
  loopText,
  PENALTY_ENDING,
  TEST_MODEL_CONTEXT_WINDOW,
  TEST_MODEL_FILE_NAME,
  TEST_MODEL_ID,
} from "../../src/inference/test-model.ts";

describe("test model", () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), "test-model-"));
  });
  after(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("builds the same bytes every time, in milliseconds, a few hundred KB", () => {
    for (let i = 0; i < 3; i++) buildTestModel(); // warm the JIT: the timing below is the steady cost
    const start = performance.now();
    const bytes = buildTestModel();
    const ms = performance.now() - start;
    console.log(`test model: ${bytes.length} bytes built in ${ms.toFixed(1)} ms`);
    assert.deepEqual(buildTestModel(), bytes);
    assert.ok(bytes.length > 100_000 && bytes.length < 1_000_000, `size ${bytes.length}`);
    assert.ok(ms < 200, `built in ${ms} ms`);
  });

  it("is a llama-architecture GGUF with the metadata llama.cpp needs", async () => {
    const file = await ensureTestModel(dir);
    const info = await readGgufFileInfo(file, { logWarnings: false });
    const { general, llama, tokenizer } = info.metadata as unknown as {
      general: Record<string, unknown>;
      llama: Record<string, unknown>;
      tokenizer: { ggml: Record<string, unknown>; chat_template: string };
    };
    assert.equal(general.architecture, "llama");
    assert.equal(general.name, TEST_MODEL_ID);
    assert.equal(llama.context_length, TEST_MODEL_CONTEXT_WINDOW);
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
    const file = await ensureTestModel(dir);
    assert.equal(file, path.join(dir, TEST_MODEL_FILE_NAME));
    const first = await stat(file);
    await new Promise((r) => setTimeout(r, 20));
    await ensureTestModel(dir);
    assert.equal((await stat(file)).mtimeMs, first.mtimeMs, "an identical file is left alone");

    await writeFile(file, "stale");
    await ensureTestModel(dir);
    assert.deepEqual(new Uint8Array(await readFile(file)), buildTestModel());

    const nested = path.join(dir, "a", "b");
    assert.equal(await ensureTestModel(nested), path.join(nested, TEST_MODEL_FILE_NAME));
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
});
