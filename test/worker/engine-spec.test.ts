/** `svc worker --model <catalog-id>=<engine>` parsing, and the reconnection backoff. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { WIRING_MODEL_ID } from "../../src/catalog/catalog.ts";
import { Backoff } from "../../src/core/backoff.ts";
import { ModelSpecError, parseModelSpec } from "../../src/worker/engine-spec.ts";

test("each kind of engine", () => {
  assert.deepEqual(parseModelSpec(`${WIRING_MODEL_ID}=builtin`), { modelId: WIRING_MODEL_ID, engine: { kind: "builtin" } });
  assert.deepEqual(parseModelSpec("Qwen/Qwen3-8B=/models/qwen3-8b.Q4_K_M.gguf"), { modelId: "Qwen/Qwen3-8B", engine: { kind: "gguf", source: "/models/qwen3-8b.Q4_K_M.gguf" } });
  assert.deepEqual(parseModelSpec("Qwen/Qwen3-8B=hf:Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf").engine, { kind: "gguf", source: "hf:Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q4_K_M.gguf" });
  // Only the first '=' separates: a URL may hold more.
  assert.deepEqual(parseModelSpec("Qwen/Qwen3-8B=http://127.0.0.1:8000/v1?key=a=b").engine, { kind: "upstream", url: "http://127.0.0.1:8000/v1?key=a=b", upstreamModel: "Qwen/Qwen3-8B" });
  // The server's own name for the model, when it is not the catalog id.
  assert.deepEqual(parseModelSpec("Qwen/Qwen3-8B=http://127.0.0.1:11434/v1#qwen3:8b").engine, { kind: "upstream", url: "http://127.0.0.1:11434/v1", upstreamModel: "qwen3:8b" });
});

test("mistakes are told apart", () => {
  for (const [arg, pattern] of [
    ["builtin", /<catalog-id>=<engine>/],
    ["=builtin", /<catalog-id>=<engine>/],
    [`${WIRING_MODEL_ID}=`, /<catalog-id>=<engine>/],
    ["meta-llama/Llama-3.3-70B-Instruct=builtin", /serves only svc-dev\/wiring-model/],
    ["Qwen/Qwen3-8B=model.bin", /an engine is/],
    ["Qwen/Qwen3-8B=http://", /not a valid URL/],
  ] as const) {
    assert.throws(() => parseModelSpec(arg), (e: Error) => e instanceof ModelSpecError && pattern.test(e.message), arg);
  }
});

test("backoff doubles up to its cap, jittered within half a step, and resets", () => {
  let r = 0;
  const backoff = new Backoff({ initialMs: 100, maxMs: 1000 }, () => r);
  const low = [backoff.next(), backoff.next(), backoff.next(), backoff.next(), backoff.next(), backoff.next()];
  assert.deepEqual(low, [50, 100, 200, 400, 500, 500]);
  r = 1;
  assert.equal(backoff.next(), 1000);
  backoff.reset();
  assert.equal(backoff.next(), 100);
});
