/**
 * Measures the llama.cpp engine on the project's wiring model: load time, time to first token,
 * single-stream and concurrent tokens/s. Run: node --import tsx bench/engine.ts [--threads N]
 */
import os from "node:os";
import path from "node:path";
import type { GenerationRequest } from "../src/inference/engine.ts";
import { LlamaEngine } from "../src/inference/llama-engine.ts";
import { buildWiringModel, ensureWiringModel, TRIGGER_WORD } from "../src/inference/wiring-model.ts";

const threadsArg = process.argv.indexOf("--threads");
const threads = threadsArg > 0 ? Number(process.argv[threadsArg + 1]) : 1;

const request: GenerationRequest = {
  messages: [{ role: "user", content: "Hi" }],
  maxTokens: 64,
  temperature: 0,
  topP: 1,
  stop: [],
  frequencyPenalty: 0,
  presencePenalty: 0,
};
// The trigger makes the model loop until max_tokens, so every run produces exactly that many tokens.
const looping: GenerationRequest = { ...request, messages: [{ role: "user", content: TRIGGER_WORD }] };

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function timed(engine: LlamaEngine, req: GenerationRequest) {
  const start = performance.now();
  let first = 0;
  let tokens = 0;
  for await (const event of engine.generate(req)) {
    if (event.type === "delta" && first === 0) first = performance.now();
    if (event.type === "done") tokens = event.usage.completionTokens;
  }
  return { ttft: first - start, total: performance.now() - start, tokens };
}

for (let i = 0; i < 3; i++) buildWiringModel();
let t = performance.now();
const bytes = buildWiringModel();
console.log(`model build: ${(performance.now() - t).toFixed(1)} ms, ${(bytes.length / 1024).toFixed(0)} KiB`);

const modelPath = await ensureWiringModel(path.join(os.tmpdir(), "svc-bench-models"));
t = performance.now();
const engine = await LlamaEngine.load({ modelPath, threads });
console.log(`engine load: ${(performance.now() - t).toFixed(0)} ms (threads ${threads}, ${engine.maxSequences} sequences)`);

try {
  await timed(engine, request); // warm-up
  const ttfts: number[] = [];
  for (let i = 0; i < 30; i++) ttfts.push((await timed(engine, { ...request, maxTokens: 1 })).ttft);
  console.log(`time to first token: median ${median(ttfts).toFixed(2)} ms over 30 requests`);

  const single = await timed(engine, { ...looping, maxTokens: 1000 });
  const rate = ((single.tokens - 1) / (single.total - single.ttft)) * 1000;
  console.log(`single stream: ${single.tokens} tokens, ${rate.toFixed(0)} tok/s after the first`);

  for (const streams of [4, 8, 16, 32]) {
    const start = performance.now();
    const runs = await Promise.all(Array.from({ length: streams }, () => timed(engine, { ...looping, maxTokens: 200 })));
    const ms = performance.now() - start;
    const tokens = runs.reduce((n, r) => n + r.tokens, 0);
    console.log(
      `${streams} concurrent: ${((tokens / ms) * 1000).toFixed(0)} tok/s overall, ` +
        `first token median ${median(runs.map((r) => r.ttft)).toFixed(1)} ms`,
    );
  }
} finally {
  await engine.close();
}
