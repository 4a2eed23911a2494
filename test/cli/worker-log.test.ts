/**
 * `svc worker --log-format json` as a real process against a gateway on loopback: every line it
 * prints is one JSON record whose message is the sentence the default format prints, with the
 * worker, model, job and amounts as fields a log collector can index; a format it does not know
 * is refused before anything starts.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { migratedTestDb, MODEL, startTestGateway, tempDir, type TestGateway } from "../support/service.ts";
import { killWorkers, spawnWorker, workerAddress } from "../support/worker-process.ts";
import { runSvc } from "./svc-process.ts";

const dir = await tempDir("svc-worker-log-");
let gateway: TestGateway;

before(async () => {
  gateway = await startTestGateway({ workers: [], db: await migratedTestDb() });
});
after(async () => {
  killWorkers();
  await gateway?.close();
  await dir.remove();
});

type LogRecord = { level: number; time: number; msg: string } & Record<string, unknown>;

test("each line is a JSON record: the sentence as its message, and what it names as fields", async () => {
  const keypair = `${dir.path}/worker.json`;
  gateway.service.trust.vouch(await workerAddress(keypair));
  const worker = await spawnWorker({ gateway: gateway.service.origin, keypair, modelsDir: `${dir.path}/models`, args: ["--log-format", "json"] });
  await worker.waitFor(/"msg":"Connected to /);
  const reply = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 5, temperature: 0 });
  await worker.waitFor(/"msg":"Earned /);
  worker.child.kill("SIGTERM");
  assert.equal(await worker.exited(), 0);

  const records = worker
    .output()
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => JSON.parse(line) as LogRecord);
  const byMessage = (start: string) => records.find((r) => r.msg.startsWith(start));
  assert.ok(records.every((r) => r.level === 30 && typeof r.time === "number"), "info records with a time");
  assert.equal(byMessage("Worker address:")?.worker, worker.address);
  assert.equal(byMessage("Serving ")?.model, MODEL);
  assert.deepEqual(byMessage("Connected to ")?.models, [MODEL]);
  const earned = byMessage("Earned ");
  assert.equal(earned?.job, reply.id.replace(/^chatcmpl-/, ""));
  assert.match(String(earned?.earnedBaseUnits), /^[1-9][0-9]*$/);
  assert.match(String(earned?.settlementTx), /^[1-9A-HJ-NP-Za-km-z]{64,88}$/);
  assert.ok(byMessage("Stopped. Earned this session:"), "the stop is a record too");
});

test("an unknown format is refused with the formats it takes", async () => {
  const result = await runSvc(["worker", "--gateway", "http://127.0.0.1:1", "--keypair", `${dir.path}/w.json`, "--model", `${MODEL}=builtin`, "--log-format", "xml"]);
  assert.equal(result.code, 2);
  assert.match(result.stderr, /--log-format is pretty or json, got 'xml'/);
});
