/**
 * A worker that fails before its first token: the job moves to another worker and the caller
 * never notices; with no other worker the job fails and charges nothing.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import * as money from "../../src/jobs/money.ts";
import { FailingWorker } from "../support/failing-worker.ts";
import { MODEL, migratedTestDb, startTestGateway, testWorker, type TestGateway } from "../support/service.ts";
import { jobConcluded } from "../support/eventually.ts";

const hi = [{ role: "user" as const, content: "Hi" }];

describe("failover before the first token", () => {
  let gateway: TestGateway;
  let failing: FailingWorker;
  let healthyAddress: string;
  before(async () => {
    // The pool breaks ties by order, so the failing worker is tried first.
    failing = new FailingWorker(await testWorker());
    const healthy = await testWorker();
    healthyAddress = healthy.address;
    gateway = await startTestGateway({ db: await migratedTestDb(), workers: [failing, healthy], credits: 100 });
  });
  after(() => gateway.close());

  test("JSON and stream both succeed on the other worker, which the headers and the job name", async () => {
    const { data, response } = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, temperature: 0 }).withResponse();
    assert.equal(data.choices[0]!.finish_reason, "stop");
    assert.equal(response.headers.get("x-svc-worker"), healthyAddress);
    await jobConcluded(gateway.service, response.headers.get("x-svc-job-id")!);
    const job = (await (await fetch(`${gateway.baseUrl}/jobs/${response.headers.get("x-svc-job-id")}`, { headers: { authorization: `Bearer ${gateway.apiKey}` } })).json()) as {
      status: string;
      worker_address: string;
    };
    assert.equal(job.status, "settled");
    assert.equal(job.worker_address, healthyAddress);

    const { data: stream, response: streamed } = await gateway.client.chat.completions
      .create({ model: MODEL, messages: hi, temperature: 0, stream: true })
      .withResponse();
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    assert.ok(text.length > 0);
    assert.equal(streamed.headers.get("x-svc-worker"), healthyAddress);
    // Idle workers take turns, so the failing one was tried first both times; failover hid it.
    assert.equal(failing.runs, 2);
    assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
  });
});

describe("no other worker to take over", () => {
  let gateway: TestGateway;
  before(async () => {
    gateway = await startTestGateway({ db: await migratedTestDb(), workers: [new FailingWorker(await testWorker())], credits: 100 });
  });
  after(() => gateway.close());

  test("the job fails and nothing is charged", async () => {
    await assert.rejects(gateway.client.chat.completions.create({ model: MODEL, messages: hi }), (e: unknown) => e instanceof OpenAI.InternalServerError);
    assert.equal(await money.availableCredits(gateway.service.db, gateway.wallet), 100);
    assert.deepEqual(await checkJobInvariants(gateway.service.db), []);
  });
});
