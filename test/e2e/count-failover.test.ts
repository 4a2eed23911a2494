/**
 * Counting a prompt moves to another worker when the first one fails at it; when that one then
 * answers it cannot count the prompt, the request fails and every lease taken is given back.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import OpenAI from "openai";
import { generateKeypair } from "../../src/core/keys.ts";
import type { Engine } from "../../src/inference/engine.ts";
import type { WorkerClient } from "../../src/worker/worker-client.ts";
import { WorkerNode } from "../../src/worker/worker-node.ts";
import { attachProtocolWorker } from "../support/protocol-worker.ts";
import { MODEL, PROMPT_TO_COUNT, migratedTestDb, startTestGateway, testEngine, type TestGateway } from "../support/service.ts";

/** The wiring model's engine, whose prompt counting fails with `error`. */
function countingFails(inner: Engine, error: () => Error): Engine {
  return {
    contextWindow: inner.contextWindow,
    countPromptTokens: () => Promise.reject(error()),
    generate: (request, signal) => inner.generate(request, signal),
    close: () => Promise.resolve(),
  };
}

let gateway: TestGateway;
let broken: WorkerNode;
let refusing: WorkerClient;

before(async () => {
  const engine = await testEngine();
  // Never assigned a job, the in-process worker is picked first; the protocol worker ran its probe.
  broken = new WorkerNode(generateKeypair(), new Map([[MODEL, countingFails(engine, () => new Error("the tokenizer crashed"))]]));
  gateway = await startTestGateway({ db: await migratedTestDb(), workers: [broken] });
  refusing = await attachProtocolWorker(gateway.service, { engines: new Map([[MODEL, countingFails(engine, () => new RangeError("this prompt cannot be counted"))]]) });
});

after(async () => {
  await refusing?.close();
  await gateway?.close();
});

test("a prompt the second worker cannot count fails the request and gives both leases back", async () => {
  const error = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: PROMPT_TO_COUNT }], max_tokens: 8 }).then(
    () => assert.fail("a prompt no worker could count was served"),
    (e: unknown) => e,
  );
  assert.ok(error instanceof OpenAI.APIError && error.status === 500 && /could not count the prompt/.test(error.message), String(error));
  const { pool } = gateway.service;
  assert.equal(pool.health(broken.address)?.stats.failed, 1, "the first worker failed at counting");
  assert.equal(pool.outstanding(broken.address), 0);
  assert.equal(pool.outstanding(refusing.address), 0, "the second worker's lease was given back");
});
