/**
 * Two deployments (two databases; here two PostgreSQL schemas) whose gateways use the same NATS
 * server: each node's pool holds its own deployment's workers and never the other's. Their
 * subjects on the bus are named by the deployment's id, which lives in its database.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { deploymentId } from "../../src/nodes/index.ts";
import { startService, type Service } from "../../src/service.ts";
import { openDb, type Db } from "../../src/store/index.ts";
import { startChainServer, type ChainServer } from "../support/chain-server.ts";
import { uniqueSchemaName } from "../support/db.ts";
import { testWorker } from "../support/service.ts";

const url = process.env.DATABASE_URL;
const natsUrl = process.env.NATS_URL ?? "nats://127.0.0.1:4222";
const ANNOUNCE_MS = 200;

describe("two deployments on one NATS server", { skip: url ? false : "DATABASE_URL is not set: the nodes share PostgreSQL" }, () => {
  const schemas = [uniqueSchemaName(), uniqueSchemaName()];
  let admin: Db;
  let server: ChainServer;
  let nodes: Service[];

  before(async () => {
    admin = await openDb({ databaseUrl: url! });
    for (const schema of schemas) await admin.exec(`CREATE SCHEMA ${schema}`);
    server = await startChainServer();
    const start = async (schema: string, withWorker: boolean) =>
      startService({ port: 0, databaseUrl: url!, databaseSchema: schema, chainUrl: server.url, keysDir: server.keysDir, natsUrl, announceMs: ANNOUNCE_MS, seedWorkers: withWorker ? [await testWorker()] : [], rateLimit: false });
    // Deployment A: a node with a worker and one without. Deployment B: a node with a worker.
    nodes = [await start(schemas[0]!, true), await start(schemas[0]!, false), await start(schemas[1]!, true)];
  });
  after(async () => {
    for (const node of nodes ?? []) await node.close();
    for (const schema of schemas) await admin.exec(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.close();
    await server.close();
  });

  test("each node sees its own deployment's workers only", async () => {
    const [a1, a2, b1] = nodes as [Service, Service, Service];
    assert.equal(await deploymentId(a1.db), await deploymentId(a2.db), "the nodes of one database share its id");
    assert.notEqual(await deploymentId(a1.db), await deploymentId(b1.db));
    // The bus carries deployment A's announcements to its node without workers...
    for (let i = 0; i < 100 && a2.pool.size < 1; i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal(a2.pool.size, 1, "deployment A's second node sees A's worker");
    // ...and several announcement periods later no node has taken in the other deployment's.
    await new Promise((r) => setTimeout(r, 5 * ANNOUNCE_MS));
    assert.deepEqual([a1.pool.size, a2.pool.size, b1.pool.size], [1, 1, 1]);
  });
});
