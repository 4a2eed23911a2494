/**
 * `svc admin` on PostgreSQL: two gateway nodes share the database (and a chain), and the operator's
 * actions run on a connection of their own, as the command opens one. A key suspended there is
 * refused 403 key_suspended on the very next request on both nodes, though both had it cached,
 * and works on both again once reinstated; a suspended worker leaves every node's pool, and comes
 * back when reinstated.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import OpenAI from "openai";
import { auditLog, runAdminOperation } from "../../src/admin/index.ts";
import { issueApiKey } from "../../src/accounts/accounts.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { startService, type Service } from "../../src/service.ts";
import { openDb, type Db } from "../../src/store/index.ts";
import type { WorkerNode } from "../../src/worker/worker-node.ts";
import { startChainServer, type ChainServer } from "../support/chain-server.ts";
import { uniqueSchemaName } from "../support/db.ts";
import { until } from "../support/eventually.ts";
import { MODEL, testWorker } from "../support/service.ts";

const url = process.env.DATABASE_URL;
const hi = [{ role: "user" as const, content: "Hi" }];

describe("svc admin on two nodes sharing PostgreSQL", { skip: url ? false : "DATABASE_URL is not set: the nodes share PostgreSQL" }, () => {
  const schema = uniqueSchemaName();
  let setup: Db;
  let operator: Db;
  let server: ChainServer;
  let nodes: Service[];
  let workers: WorkerNode[];

  before(async () => {
    setup = await openDb({ databaseUrl: url! });
    await setup.exec(`CREATE SCHEMA ${schema}`);
    server = await startChainServer();
    workers = [await testWorker(), await testWorker()];
    const start = (worker: WorkerNode) => startService({ port: 0, databaseUrl: url!, databaseSchema: schema, chainUrl: server.url, keysDir: server.keysDir, seedWorkers: [worker], rateLimit: false });
    nodes = [await start(workers[0]!), await start(workers[1]!)];
    operator = await openDb({ databaseUrl: url!, schema });
  });
  after(async () => {
    await operator?.close();
    for (const node of nodes ?? []) await node.close();
    await setup.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await setup.close();
    await server?.close();
  });

  async function account(credits: number) {
    const wallet = generateKeypair().address;
    await nodes[0]!.deposits.deposit(wallet, credits);
    const apiKey = await issueApiKey(nodes[0]!.db, wallet);
    return { wallet, clients: nodes.map((n) => new OpenAI({ apiKey, baseURL: n.baseUrl, maxRetries: 0 })) };
  }

  const ask = (client: OpenAI) => client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 4 }).withResponse();

  test("a key suspended by the operator is refused on both nodes at once, and works on both when reinstated", async () => {
    const caller = await account(200);
    for (const client of caller.clients) assert.ok((await ask(client)).data.choices[0], "each node accepted and cached the key");

    await runAdminOperation(operator, { action: "keys.suspend", wallet: caller.wallet, reason: "abuse" }, "ops@test");
    for (const client of caller.clients) {
      await assert.rejects(ask(client), (error: { status: number; code: string }) => {
        assert.equal(error.status, 403);
        assert.equal(error.code, "key_suspended");
        return true;
      });
    }
    await runAdminOperation(operator, { action: "keys.reinstate", wallet: caller.wallet, reason: "resolved" }, "ops@test");
    for (const client of caller.clients) assert.ok((await ask(client)).data.choices[0], "works again on each node");

    const log = await auditLog(operator, 2);
    assert.deepEqual(log.map((e) => [e.action, e.target, e.reason]), [
      ["keys.reinstate", caller.wallet, "resolved"],
      ["keys.suspend", caller.wallet, "abuse"],
    ]);
  });

  test("a worker suspended by the operator leaves every node's pool, and returns when reinstated", async () => {
    const caller = await account(200);
    const worker = workers[1]!.address;
    await runAdminOperation(operator, { action: "workers.suspend", worker, reason: "wrong outputs" }, "ops@test");
    await until(async () => nodes.map((n) => n.pool.isSuspended(worker)), (all) => all.every(Boolean), "both nodes to hear the suspension");
    // The second node's only worker is that one.
    await assert.rejects(ask(caller.clients[1]!), (error: { status: number; code: string }) => {
      assert.equal(error.status, 503);
      assert.equal(error.code, "no_workers_available");
      return true;
    });
    await runAdminOperation(operator, { action: "workers.reinstate", worker }, "ops@test");
    await until(async () => nodes.map((n) => n.pool.isSuspended(worker)), (all) => all.every((s) => !s), "both nodes to hear the reinstatement");
    const { response } = await ask(caller.clients[1]!);
    assert.equal(response.headers.get("x-svc-worker"), worker);
  });
});
