/**
 * The gateway's own count of a catalog model's output, with the model family's tokenizer, on a
 * real gateway on loopback: a worker serving Qwen3 1.7B claims 4,144 tokens for 4,140 bytes of
 * English (what the byte bound alone would allow); the caller is charged for what the Qwen
 * tokenizer counts, and the worker is struck for the claim. A short text's claim within its floor
 * of tokens is charged as claimed, and one token above it is counted. Each family's tokenizer
 * counts a known text; Gemma 3's splits as Google documents its tokenizer.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { completionCost, TIERS } from "../../src/core/pricing.ts";
import { FamilyTokenizers } from "../../src/inference/family-tokenizers.ts";
import { SILENT_TOKENS } from "../../src/inference/token-bounds.ts";
import { tokenRange } from "../../src/inference/token-pieces.ts";
import { creditsRemaining } from "../support/gateway-api.ts";
import { jobConcluded } from "../support/eventually.ts";
import { startWorkerFixture, type WorkerFixture } from "../support/worker-fixture.ts";

const QWEN = "Qwen/Qwen3-1.7B";
const TEXT = "The quick brown fox jumps over the lazy dog. ".repeat(92);

let fixture: WorkerFixture;
let tokenizers: FamilyTokenizers;
before(async () => {
  fixture = await startWorkerFixture({ credits: 500 });
  tokenizers = new FamilyTokenizers();
});
after(async () => {
  await tokenizers.close();
  await fixture.close();
});

test("each family's tokenizer counts a text as that family does", async () => {
  const sentence = "Solana settles many payments in one transaction; each job keeps its own receipt.";
  assert.deepEqual(await Promise.all((["llama3", "qwen", "mistral", "gemma3"] as const).map((f) => tokenizers.count(f, sentence))), [16, 16, 19, 16]);
  assert.equal(await tokenizers.count("qwen", TEXT), 921);
});

test("Gemma 3's tokenizer splits a sentence as Google's Gemma tokenizer guide does", async () => {
  // google-deepmind/gemma, colabs/tokenizer.ipynb: 'Der', 'ink', 'uyu', ' is', ' an', ' underground', ' city', '.'
  assert.equal(await tokenizers.count("gemma3", "Derinkuyu is an underground city."), 8);
  // The guide's other splits: a leading space is part of the next piece; a trailing one is a piece of its own.
  assert.equal(await tokenizers.count("gemma3", " hello"), 1);
  assert.equal(await tokenizers.count("gemma3", "The capital of France is "), 6);
});

test("4,140 bytes claimed as 4,144 tokens of Qwen3 1.7B: charged for the tokenizer's count, and the claim is struck", async () => {
  const { gateway } = fixture;
  assert.equal(Buffer.byteLength(TEXT), 4_140);
  const worker = await fixture.raw({ vouched: true });
  await worker.register({ models: [{ id: QWEN, contextWindow: 32_768 }] });
  const serving = (async () => {
    const job = await worker.nextJob(12);
    worker.finish(job.jobId, TEXT, 4_144);
  })();
  const balance = await creditsRemaining(gateway);
  const { data, response } = await gateway.client.chat.completions.create({ model: QWEN, messages: [{ role: "user", content: "Tell me about foxes." }], max_tokens: 4_200 }, { timeout: 60_000 }).withResponse();
  await serving;
  const counted = (await tokenizers.count("qwen", TEXT)) + SILENT_TOKENS;
  assert.equal(data.usage!.completion_tokens, counted, "the caller sees the gateway's count");
  const job = await jobConcluded(gateway.service, response.headers.get("x-svc-job-id")!);
  assert.equal(job.creditsCharged, completionCost(TIERS.lite, counted));
  assert.ok(job.creditsCharged < completionCost(TIERS.lite, 4_144), `${job.creditsCharged} credits, not the claim's ${completionCost(TIERS.lite, 4_144)}`);
  assert.equal(await creditsRemaining(gateway), balance - job.creditsCharged);
  assert.equal(gateway.service.pool.health(worker.signer.address)?.stats.overstated, 1);
  worker.close();
});

test("a claim within a short text's floor of tokens is charged as claimed; one token more is counted and struck", async () => {
  const { gateway } = fixture;
  const text = "The capital of France is Paris.";
  const floor = tokenRange("qwen", text)!.atLeast;
  const counted = (await tokenizers.count("qwen", text)) + SILENT_TOKENS;
  const worker = await fixture.raw({ vouched: true });
  await worker.register({ models: [{ id: QWEN, contextWindow: 32_768 }] });
  for (const [claimed, charged, overstated] of [
    [floor + SILENT_TOKENS, floor + SILENT_TOKENS, 0],
    [floor + SILENT_TOKENS + 1, counted, 1],
  ] as const) {
    const serving = (async () => worker.finish((await worker.nextJob(12)).jobId, text, claimed))();
    const { data, response } = await gateway.client.chat.completions.create({ model: QWEN, messages: [{ role: "user", content: "Capital of France?" }], max_tokens: 64 }).withResponse();
    await serving;
    assert.equal(data.usage!.completion_tokens, charged, `claimed ${claimed}`);
    const job = await jobConcluded(gateway.service, response.headers.get("x-svc-job-id")!);
    assert.equal(job.creditsCharged, completionCost(TIERS.lite, charged));
    assert.equal(gateway.service.pool.health(worker.signer.address)?.stats.overstated, overstated);
  }
  worker.close();
});
