/**
 * A gateway whose chain is a cluster over RPC (`svc chain serve` in its own process) behind a
 * proxy that loses answers and returns 429 and 503: paid completions, JSON and streamed, through
 * the official SDK, each locked, settled and charged exactly once, the ledger equal to the chain.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { checkInvariants } from "../../src/ledger/index.ts";
import { checkJobInvariants } from "../../src/jobs/job-invariants.ts";
import { assertChainAgrees, assertWorkerPaidOnChain } from "../support/chain-checks.ts";
import { startChainServer, type ChainServer } from "../support/chain-server.ts";
import { startFaultyRpcProxy, type FaultyRpcProxy } from "../support/faulty-rpc-proxy.ts";
import { MODEL, migratedTestDb, startTestGateway, testWorker, type TestGateway } from "../support/service.ts";
import type { WorkerNode } from "../../src/worker/worker-node.ts";

const hi = [{ role: "user" as const, content: "Hi" }];

describe("paid jobs with the chain on a cluster behind a faulty RPC", () => {
  let server: ChainServer;
  let proxy: FaultyRpcProxy;
  let gateway: TestGateway;
  let worker: WorkerNode;
  before(async () => {
    server = await startChainServer();
    proxy = await startFaultyRpcProxy(server.url);
    worker = await testWorker();
    gateway = await startTestGateway({ db: await migratedTestDb(), chainUrl: proxy.url, keysDir: server.keysDir, workers: [worker], credits: 200 });
  });
  after(async () => {
    await gateway.close();
    await proxy.close();
    await server.close();
  });

  test("every job is charged once though a third of the answers are lost or refused", async () => {
    // Every third call of each method fails, not a random third, so the faults happen however few
    // calls the gateway's batching makes: a random third can make none.
    const faults = { lostSends: 0, refused: 0 };
    proxy.fault = ({ method, seen }) => {
      if (seen % 3 !== 1) return { kind: "pass" };
      if (method === "sendTransaction") {
        faults.lostSends++;
        return { kind: "lose-response" };
      }
      faults.refused++;
      return faults.refused % 2 === 0 ? { kind: "status", status: 503 } : { kind: "status", status: 429, retryAfterS: 0 };
    };
    const json = Array.from({ length: 6 }, () => gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8 }));
    const streams = Array.from({ length: 4 }, async () => {
      const stream = await gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 8, stream: true });
      let text = "";
      for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
      return text;
    });
    const answers = await Promise.all(json);
    const texts = await Promise.all(streams);
    for (const answer of answers) assert.ok(answer.choices[0]!.message.content);
    for (const text of texts) assert.ok(text.length > 0);

    // Streams settle after their last chunk; wait for the chain and the books.
    const db = gateway.service.db;
    for (let i = 0; i < 200; i++) {
      // A job of an escrow table waits in its worker's batch before its settlement is sent.
      const open = await db.query("SELECT 1 FROM chain_actions WHERE state = 'sent' UNION ALL SELECT 1 FROM jobs WHERE status = 'settling'");
      if (open.length === 0) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    proxy.fault = () => ({ kind: "pass" });
    assert.ok(faults.lostSends > 0, "answers to sendTransaction were lost");
    assert.ok(faults.refused > 0, "calls were refused with 429 or 503");
    const jobs = await db.query<{ status: string; credits_charged: number }>("SELECT status, credits_charged FROM jobs WHERE wallet = $1", [gateway.wallet]);
    assert.equal(jobs.length, 10);
    assert.deepEqual(jobs.map((j) => j.status), Array(10).fill("settled"));
    const actions = await db.query<{ kind: string; state: string }>("SELECT kind, state FROM chain_actions WHERE subject IN (SELECT id FROM jobs WHERE wallet = $1)", [gateway.wallet]);
    assert.deepEqual(actions.filter((a) => a.state !== "confirmed"), [], "every lock and settlement confirmed");
    const charged = jobs.reduce((sum, j) => sum + Number(j.credits_charged), 0);
    const account = await (await fetch(`${gateway.baseUrl}/account`, { headers: { authorization: `Bearer ${gateway.apiKey}` } })).json() as { credits_remaining: number };
    assert.equal(account.credits_remaining, 200 - charged, "charged once per job");
    await assertChainAgrees(gateway.service, gateway.wallet);
    assert.ok((await assertWorkerPaidOnChain(gateway.service, worker.address)) > 0n);
    assert.deepEqual(await checkInvariants(db), []);
    assert.deepEqual(await checkJobInvariants(db), []);
  });
});
