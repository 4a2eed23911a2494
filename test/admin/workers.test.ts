/**
 * The operator's suspension of a worker, on a real gateway with a real worker connected through
 * the protocol: suspended, it gets no caller's job (the only worker of its model: 503
 * no_workers_available), also after it reconnects; reinstated, it serves again at once. The
 * suspension is kept in the database, applied by a node that starts later, and every action has
 * its row in the audit log; an action that cannot be taken leaves none.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { AdminRefusal, auditLog, runAdminOperation } from "../../src/admin/index.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { followWorkerSuspensions, WorkerPool } from "../../src/network/index.ts";
import { silentLogger } from "../../src/core/index.ts";
import { attachProtocolWorker } from "../support/protocol-worker.ts";
import { MODEL } from "../support/service.ts";
import { startWorkerFixture, type WorkerFixture } from "../support/worker-fixture.ts";

let fixture: WorkerFixture;

before(async () => {
  fixture = await startWorkerFixture();
});
after(() => fixture.close());

const hi = [{ role: "user" as const, content: "Hi" }];

async function servedBy(): Promise<string | null> {
  const reply = await fixture.gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 4 }).withResponse();
  return reply.response.headers.get("x-svc-worker");
}

async function refusedForNoWorker(): Promise<void> {
  await assert.rejects(fixture.gateway.client.chat.completions.create({ model: MODEL, messages: hi, max_tokens: 4 }), (error: { status: number; code: string }) => {
    assert.equal(error.status, 503);
    assert.equal(error.code, "no_workers_available");
    return true;
  });
}

test("a suspended worker gets no jobs, also after reconnecting; reinstated, it serves again", async () => {
  const { service } = fixture.gateway;
  const signer = generateKeypair();
  const first = await attachProtocolWorker(service, { signer });
  assert.equal(await servedBy(), signer.address);

  const said = await runAdminOperation(service.db, { action: "workers.suspend", worker: signer.address, reason: "wrong outputs reported" }, "ops@test");
  assert.match(said.lines.join("\n"), /Suspended worker/);
  // On the embedded store the notification arrives before the suspending call returns.
  assert.equal(service.pool.isSuspended(signer.address), true);
  await refusedForNoWorker();

  // Its reconnection is registered, and still gets nothing.
  await first.close();
  const again = await attachProtocolWorker(service, { signer });
  try {
    assert.deepEqual(service.pool.suspendedConnected(), [signer.address]);
    await refusedForNoWorker();
    const listed = await runAdminOperation(service.db, { action: "workers.list" }, "ops@test");
    assert.match(listed.lines.join("\n"), new RegExp(`${signer.address}  since \\S+  wrong outputs reported`));

    await runAdminOperation(service.db, { action: "workers.reinstate", worker: signer.address, reason: "cleared" }, "ops@test");
    assert.equal(service.pool.isSuspended(signer.address), false);
    assert.equal(await servedBy(), signer.address, "served at once, without a reconnect");
  } finally {
    await again.close();
  }
  const log = await auditLog(service.db, 10);
  assert.deepEqual(
    log.slice(0, 2).map((e) => [e.action, e.target, e.reason, e.actor]),
    [
      ["workers.reinstate", signer.address, "cleared", "ops@test"],
      ["workers.suspend", signer.address, "wrong outputs reported", "ops@test"],
    ],
  );
});

test("a node that starts later applies the suspensions kept in the database", async () => {
  const { db } = fixture.gateway.service;
  const worker = generateKeypair().address;
  await runAdminOperation(db, { action: "workers.suspend", worker, reason: "kept" }, "ops@test");
  const pool = new WorkerPool();
  await followWorkerSuspensions(db, pool, silentLogger());
  assert.equal(pool.isSuspended(worker), true);
  // And it hears a reinstatement made after it started.
  await runAdminOperation(db, { action: "workers.reinstate", worker }, "ops@test");
  assert.equal(pool.isSuspended(worker), false);
});

test("an action that cannot be taken is refused, and the audit log does not record it", async () => {
  const { db } = fixture.gateway.service;
  const before = (await auditLog(db, 1000)).length;
  const stranger = generateKeypair().address;
  await assert.rejects(runAdminOperation(db, { action: "keys.suspend", wallet: stranger, reason: "spam" }, "ops@test"), new AdminRefusal(`no API key for wallet ${stranger}`));
  await assert.rejects(runAdminOperation(db, { action: "workers.reinstate", worker: stranger }, "ops@test"), new AdminRefusal(`worker ${stranger} is not suspended`));
  await runAdminOperation(db, { action: "workers.suspend", worker: stranger, reason: "first" }, "ops@test");
  await assert.rejects(runAdminOperation(db, { action: "workers.suspend", worker: stranger, reason: "second" }, "ops@test"), /is suspended already \(since .*: first\)/);
  await assert.rejects(runAdminOperation(db, { action: "keys.reinstate", wallet: fixture.gateway.wallet }, "ops@test"), /is not suspended/);
  const log = await auditLog(db, 1000);
  assert.equal(log.length, before + 1, "only the suspension that happened");
  assert.deepEqual([log[0]!.action, log[0]!.target, log[0]!.reason], ["workers.suspend", stranger, "first"]);
});
