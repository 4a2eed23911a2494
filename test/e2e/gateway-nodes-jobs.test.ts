/**
 * A job whose worker is connected to another gateway node keeps the worker protocol's promises
 * across the bus: a caller who leaves mid-stream pays for what was generated and the worker stops;
 * a worker that fails before its first token hands the job to another node's worker. Three
 * in-process nodes on one PostgreSQL schema, a chain server process and the machine's NATS; the
 * requests go to the node with no worker of its own.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { issueApiKey } from "../../src/accounts/accounts.ts";
import { completionCost, TIERS } from "../../src/core/pricing.ts";
import { generateKeypair, verifyEd25519 } from "../../src/core/keys.ts";
import { base58Decode } from "../../src/core/base58.ts";
import { newId } from "../../src/core/ids.ts";
import { settlementMessageOf } from "../../src/core/settlement-proof.ts";
import { SettlementRefusedError } from "../../src/network/worker-handle.ts";
import { TRIGGER_WORD } from "../../src/inference/wiring-model.ts";
import { getJob } from "../../src/jobs/job-repo.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { startService, type Service } from "../../src/service.ts";
import { openDb, type Db } from "../../src/store/index.ts";
import { assertChainAgrees } from "../support/chain-checks.ts";
import { startChainServer, type ChainServer } from "../support/chain-server.ts";
import { uniqueSchemaName } from "../support/db.ts";
import { FailingWorker } from "../support/failing-worker.ts";
import { MODEL, testWorker } from "../support/service.ts";

const url = process.env.DATABASE_URL;
const natsUrl = process.env.NATS_URL ?? "nats://127.0.0.1:4222";

describe("jobs on a worker connected to another node", { skip: url ? false : "DATABASE_URL is not set: the nodes share PostgreSQL" }, () => {
  const schema = uniqueSchemaName();
  let admin: Db;
  let server: ChainServer;
  let nodes: Service[];
  let failing: FailingWorker;
  let good: string;
  let client: OpenAI;
  let wallet: string;

  before(async () => {
    admin = await openDb({ databaseUrl: url! });
    await admin.exec(`CREATE SCHEMA ${schema}`);
    server = await startChainServer();
    const start = (seedWorkers: Awaited<ReturnType<typeof testWorker>>[] | FailingWorker[]) =>
      startService({ port: 0, databaseUrl: url!, databaseSchema: schema, chainUrl: server.url, keysDir: server.keysDir, natsUrl, announceMs: 200, seedWorkers, rateLimit: false });
    const worker = await testWorker();
    good = worker.address;
    failing = new FailingWorker(await testWorker());
    nodes = [await start([]), await start([worker]), await start([failing])];
    for (let i = 0; i < 100 && nodes[0]!.pool.size < 2; i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(nodes[0]!.pool.size, 2, "the node without workers sees both");
    wallet = generateKeypair().address;
    await nodes[0]!.deposits.deposit(wallet, 100);
    client = new OpenAI({ apiKey: await issueApiKey(nodes[0]!.db, wallet), baseURL: nodes[0]!.baseUrl, maxRetries: 0 });
  });
  after(async () => {
    for (const node of nodes) await node.close();
    await admin.exec(`DROP SCHEMA ${schema} CASCADE`);
    await admin.close();
    await server.close();
  });

  test("a worker on another node that fails before its first token: the job moves to another node's worker", async () => {
    const before = failing.runs;
    for (let i = 0; i < 4; i++) {
      const { data, response } = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 8 }).withResponse();
      assert.ok(data.choices[0]!.message.content);
      assert.equal(response.headers.get("x-svc-worker"), good);
    }
    assert.ok(failing.runs > before, "the failing worker was tried");
  });

  test("a caller who leaves mid-stream pays for what was generated; the worker on the other node stops", async () => {
    const controller = new AbortController();
    const { data: stream, response } = await client.chat.completions
      .create({ model: MODEL, messages: [{ role: "user", content: `Say ${TRIGGER_WORD}` }], temperature: 0, max_tokens: 1900, stream: true }, { signal: controller.signal })
      .withResponse();
    const jobId = response.headers.get("x-svc-job-id")!;
    let chunks = 0;
    try {
      for await (const _ of stream) if (++chunks === 300) controller.abort();
    } catch {
      // The SDK ends the iteration or throws its abort error, depending on timing.
    }
    let job = await getJob(nodes[0]!.db, jobId);
    for (let i = 0; i < 300 && job?.status !== "settled" && job?.status !== "failed"; i++) {
      await new Promise((r) => setTimeout(r, 50));
      job = await getJob(nodes[0]!.db, jobId);
    }
    assert.equal(job?.status, "settled");
    assert.equal(job.workerAddress, good);
    assert.ok(job.completionTokens >= 300 && job.completionTokens < 1900, `${job.completionTokens} tokens: what was read, not the whole reply`);
    assert.equal(job.creditsCharged, completionCost(TIERS.lite, job.completionTokens));
    await assertChainAgrees(nodes[0]!, wallet);
    assert.deepEqual(await checkInvariants(nodes[0]!.db), []);
  });

  test("a worker on another node signs the settlement of its job, asked over the bus", async () => {
    const { response } = await client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 8 }).withResponse();
    const job = (await getJob(nodes[0]!.db, response.headers.get("x-svc-job-id")!))!;
    const bridged = nodes[0]!.pool.all().find((h) => h.address === good)!;
    const table = generateKeypair().address;
    const entry = { jobId: job.id, slot: 0, charge: 10_000n, promptTokens: job.promptTokens, completionTokens: job.completionTokens };
    const signature = await bridged.signSettlement({ table, jobs: [entry] });
    const message = settlementMessageOf(base58Decode(table, 32), [{ ...entry, outputHash: Buffer.from(job.proofHash!.slice("sha256:".length), "hex") }]);
    assert.ok(verifyEd25519(good, message, signature));
    await assert.rejects(bridged.signSettlement({ table, jobs: [{ ...entry, jobId: newId("job") }] }), SettlementRefusedError);
  });
});
