/**
 * The model commands call the catalog's governance and record each action; what the catalog
 * refuses is a refusal. The admin socket checks and bounds what it is sent, and a second process
 * cannot take over the socket of a data dir a live node serves.
 */
import assert from "node:assert/strict";
import { request } from "node:http";
import { after, before, test } from "node:test";
import { AdminRefusal, auditLog, checkOperation, runAdminOperation, serveAdminSocket, type AdminSocket } from "../../src/admin/index.ts";
import { listGovernedModels } from "../../src/catalog/index.ts";
import { silentLogger } from "../../src/core/index.ts";
import type { Db } from "../../src/store/index.ts";
import { migratedTestDb, tempDir } from "../support/service.ts";

let db: Db;
let dir: { path: string; remove(): Promise<void> };
let socket: AdminSocket;

before(async () => {
  db = await migratedTestDb();
  dir = await tempDir("svc-admin-socket-");
  socket = await serveAdminSocket({ db, dataDir: dir.path, logger: silentLogger() });
});
after(async () => {
  await socket.close();
  await db.close();
  await dir.remove();
});

const approval = { id: "acme/Tiny-1B", ownedBy: "Acme", tier: "lite" as const, parameters: "1B", contextWindow: 8192, description: "Tiny 1B", tokenizer: "llama3" as const };

test("models are approved, retired and listed through the catalog, each action in the audit log", async () => {
  const approved = await runAdminOperation(db, { action: "models.approve", model: approval, reason: "passed evaluation" }, "ops@test");
  assert.match(approved.lines[0]!, /Approved model acme\/Tiny-1B/);
  await assert.rejects(
    runAdminOperation(db, { action: "models.retire", id: "acme/Unknown", retiresAt: "2027-01-31T00:00:00.000Z", reason: "gone" }, "ops@test"),
    (error) => error instanceof AdminRefusal && /acme\/Unknown.*not approved/.test(error.message),
  );
  await runAdminOperation(db, { action: "models.retire", id: approval.id, retiresAt: "2027-01-31T00:00:00.000Z", reason: "superseded" }, "ops@test");
  const model = (await listGovernedModels(db)).find((m) => m.id === approval.id)!;
  assert.equal(model.retiresAt?.toISOString(), "2027-01-31T00:00:00.000Z");
  assert.equal(model.retirementReason, "superseded");
  const listed = await runAdminOperation(db, { action: "models.list" }, "ops@test");
  assert.ok(listed.lines.some((line) => line.startsWith("acme/Tiny-1B  lite  1B  ctx 8192") && line.endsWith("retires 2027-01-31T00:00:00.000Z: superseded")));
  assert.deepEqual(
    (await auditLog(db, 10)).map((e) => [e.action, e.target, e.reason]),
    [
      ["models.retire", approval.id, "superseded"],
      ["models.approve", approval.id, "passed evaluation"],
    ],
  );
});

test("operations are checked: required fields, addresses, tiers, dates", () => {
  const wrong = (value: unknown) => {
    const checked = checkOperation(value);
    return checked.ok ? "accepted" : checked.message;
  };
  assert.match(wrong({ action: "keys.suspend", wallet: "not-an-address", reason: "x" }), /--wallet takes a wallet address/);
  assert.match(wrong({ action: "workers.suspend", worker: "11111111111111111111111111111111" }), /--reason is required/);
  assert.match(wrong({ action: "models.approve", model: { ...approval, tier: "gold" } }), /--tier is one of lite, standard, pro, max/);
  assert.match(wrong({ action: "models.retire", id: approval.id, retiresAt: "next tuesday", reason: "x" }), /--at takes an ISO 8601 date/);
  assert.match(wrong({ action: "log", limit: 0 }), /--limit is a whole number from 1 to 1000/);
  assert.match(wrong({ action: "drop" }), /unknown operation 'drop'/);
  assert.equal(wrong({ action: "log", limit: "5" }), "accepted");
});

function post(body: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: socket.path, method: "POST", path: "/operations", agent: false, headers: { "content-type": "application/json" } }, (response) => {
      let text = "";
      response.on("data", (chunk: Buffer) => (text += chunk.toString()));
      response.on("end", () => resolve({ status: response.statusCode!, body: text }));
    });
    req.on("error", reject);
    req.end(body);
  });
}

test("the socket refuses what is not an operation, and bodies over its limit", async () => {
  assert.equal((await post(JSON.stringify({ operation: { action: "drop" }, by: "x" }))).status, 400);
  assert.equal((await post(JSON.stringify({ operation: { action: "log" } }))).status, 400, "who asks is required");
  const missing = await post(JSON.stringify({ operation: { action: "workers.suspend", worker: "11111111111111111111111111111111" }, by: "x" }));
  assert.deepEqual([missing.status, JSON.parse(missing.body)], [400, { usage: "--reason is required" }]);
  assert.equal((await post(JSON.stringify({ operation: { action: "log", limit: 1, pad: "x".repeat(20_000) }, by: "x" }))).status, 413);
  const fine = await post(JSON.stringify({ operation: { action: "log", limit: 1 }, by: "x" }));
  assert.equal(fine.status, 200);
  assert.ok(Array.isArray(JSON.parse(fine.body).lines));
});

test("a second process cannot serve the socket of a data dir a live node serves", async () => {
  await assert.rejects(serveAdminSocket({ db, dataDir: dir.path, logger: silentLogger() }), /another svc process serves .*admin\.sock/);
  assert.equal((await post(JSON.stringify({ operation: { action: "log", limit: 1 }, by: "x" }))).status, 200, "the first still serves");
});
