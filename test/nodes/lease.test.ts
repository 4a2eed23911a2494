/**
 * Gateway nodes sharing one PostgreSQL database and one chain (`svc chain serve` in its own
 * process). A node whose lease ran out left work behind, exactly as a kill -9 leaves it: a job
 * mid-generation with its escrow locked, and a settlement recorded but never sent. A surviving
 * node takes it over within a lease: the first job is refunded, the second settled, each once,
 * and the ledger equals the chain. A second process under a live node's id refuses to start.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ChainJournal } from "../../src/chain/index.ts";
import { silentLogger } from "../../src/core/index.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { newId } from "../../src/core/ids.ts";
import { outputHash, proofMessage } from "../../src/core/proof.ts";
import { prepareEscrow, prepareSettlement } from "../../src/jobs/job-chain.ts";
import { newPendingJob } from "../../src/jobs/job-record.ts";
import { getJob, insertJob, mustMoveJob } from "../../src/jobs/job-repo.ts";
import * as money from "../../src/jobs/money.ts";
import { checkInvariants } from "../../src/ledger/index.ts";
import { NodeIdInUseError } from "../../src/nodes/index.ts";
import { startService, type Service } from "../../src/service.ts";
import { openDb, type Db } from "../../src/store/index.ts";
import { assertChainAgrees } from "../support/chain-checks.ts";
import { startChainServer, type ChainServer } from "../support/chain-server.ts";
import { uniqueSchemaName } from "../support/db.ts";

const url = process.env.DATABASE_URL;
const DEAD = "node_dead";

describe("nodes sharing PostgreSQL and a chain", { skip: url ? false : "DATABASE_URL is not set: nodes share PostgreSQL" }, () => {
  const schema = uniqueSchemaName();
  let admin: Db;
  let server: ChainServer;
  let survivor: Service;
  const start = (extra: { nodeId?: string } = {}) =>
    startService({ port: 0, databaseUrl: url!, databaseSchema: schema, chainUrl: server.url, keysDir: server.keysDir, nodeLeaseMs: 600, ...extra });

  before(async () => {
    admin = await openDb({ databaseUrl: url! });
    await admin.exec(`CREATE SCHEMA ${schema}`);
    server = await startChainServer({ slotMs: 50 });
    survivor = await start();
  });
  after(async () => {
    await survivor.close();
    await admin.exec(`DROP SCHEMA ${schema} CASCADE`);
    await admin.close();
    await server.close();
  });

  /** A job of the dead node, its escrow locked on-chain, its worker generating. */
  async function deadNodesJob(wallet: string, worker: string, dead: ChainJournal) {
    const id = newId("job");
    const escrow = await prepareEscrow(survivor.chain, { jobId: id, tier: "lite", wallet, credits: 4 });
    const job = newPendingJob({ id, wallet, model: "svc-dev/wiring-model", tier: "lite", creditsLocked: 4, maxTokens: 100, promptTokens: 10, escrowAddress: escrow.escrowAddress, escrowTx: escrow.signature });
    await survivor.db.transaction(async (tx) => {
      await money.reserve(tx, wallet, id, 4);
      await insertJob(tx, job, DEAD);
      await dead.record(tx, escrow);
    });
    await survivor.journal.send(escrow);
    await mustMoveJob(survivor.db, job, "worker_assigned", { workerAddress: worker });
    return (await getJob(survivor.db, id))!;
  }

  test("a node whose lease ran out is taken over: its jobs refunded or settled once", async () => {
    const wallet = generateKeypair().address;
    const worker = generateKeypair();
    await survivor.deposits.deposit(wallet, 20);
    const dead = new ChainJournal(survivor.db, survivor.chain, silentLogger(), DEAD);
    const interrupted = await deadNodesJob(wallet, worker.address, dead);
    const settling = await deadNodesJob(wallet, worker.address, dead);
    const proofHash = outputHash("Hello");
    const changes = { proofHash, proofSignature: Buffer.from(worker.sign(proofMessage(settling.id, proofHash))).toString("base64"), creditsCharged: 3, completionTokens: 2 };
    const settlement = await prepareSettlement(survivor.chain, { ...settling, ...changes });
    await survivor.db.transaction(async (tx) => {
      await mustMoveJob(tx, settling, "proof_recorded", { ...changes, settlementTx: settlement.signature });
      await dead.record(tx, settlement);
    });
    // The dead node's lease, run out a moment ago.
    await survivor.db.query("INSERT INTO gateway_nodes (node_id, incarnation, lease_until) VALUES ($1, 'gone', now() - interval '1 second')", [DEAD]);

    const started = Date.now();
    for (;;) {
      const rows = await survivor.db.query("SELECT 1 FROM gateway_nodes WHERE node_id = $1", [DEAD]);
      if (rows.length === 0) break;
      assert.ok(Date.now() - started < 20_000, "taken over within 20 s");
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal((await getJob(survivor.db, interrupted.id))!.status, "failed");
    assert.ok((await getJob(survivor.db, interrupted.id))!.refundTx, "its escrow went back on-chain");
    const settled = (await getJob(survivor.db, settling.id))!;
    assert.equal(settled.status, "settled");
    assert.equal(settled.settlementTx, settlement.signature, "the recorded settlement was sent, not a second one");
    assert.equal(await money.availableCredits(survivor.db, wallet), 17, "charged 3, once");
    await assertChainAgrees(survivor, wallet);
    assert.deepEqual(await checkInvariants(survivor.db), []);
    assert.deepEqual(await survivor.db.query("SELECT signature FROM chain_actions WHERE state = 'sent'"), []);
    const owners = await survivor.db.query<{ node_id: string }>("SELECT DISTINCT node_id FROM jobs WHERE id = ANY($1::text[])", [[interrupted.id, settling.id]]);
    assert.deepEqual(owners.map((o) => o.node_id), [survivor.nodeId], "its jobs are the survivor's now (it closes their escrow records later)");
  });

  test("a second process under a live node's id refuses to start", async () => {
    await assert.rejects(start({ nodeId: survivor.nodeId }), NodeIdInUseError);
  });
});
