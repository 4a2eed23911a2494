/**
 * The delivery loop against a real HTTPS receiver on loopback: order per webhook, failures that
 * are not 2xx, the 10-second rule (shortened), the address check at delivery time with the
 * connection pinned to the checked address, and two nodes sharing one database never sending
 * the same delivery twice. Runs on PGlite and SQLite, and on PostgreSQL too when DATABASE_URL is set.
 */
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, afterEach, before, describe, test } from "node:test";
import { silentLogger } from "../../src/core/logger.ts";
import { newId } from "../../src/core/ids.ts";
import { ACCOUNTS_MIGRATIONS } from "../../src/accounts/schema.ts";
import { EVENTS_MIGRATIONS, openWebhooks, startWebhookDelivery, type DeliveryLoop, type WebhookOptions, type Webhooks } from "../../src/events/index.ts";
import { emitEvent } from "../../src/events/outbox.ts";
import type { Resolver } from "../../src/events/target.ts";
import { insertWebhook } from "../../src/events/webhook-repo.ts";
import { openDb, type Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";
import { testCert } from "../support/tls-cert.ts";
import { startReceiver, type Receiver } from "../support/webhook-receiver.ts";

const SECRET = "whsec-delivery-tests-0123456789";
const key = randomBytes(32);

for (const backend of testDatabases({ sqlite: true })) {
  describe(`webhook delivery on ${backend.name}`, () => {
    let db: Db;
    let receiver: Receiver;
    const loops: DeliveryLoop[] = [];

    // One database for the file: each test has webhooks and wallets of its own.
    before(async () => {
      receiver = await startReceiver(SECRET);
      // The events tables, and the wallets table their migration adds a column to.
      db = await backend.open({ migrations: [...ACCOUNTS_MIGRATIONS, ...EVENTS_MIGRATIONS] });
    });
    after(async () => {
      await db.close();
      await receiver.close();
    });
    afterEach(async () => {
      for (const loop of loops.splice(0)) await loop.stop();
    });

    async function node(on: Db, options: WebhookOptions = {}): Promise<Webhooks> {
      const webhooks = await openWebhooks({
        db: on,
        logger: silentLogger(),
        secretKey: key,
        allowLoopback: true,
        trustedCa: (await testCert()).cert,
        timeScale: 0.0002,
        ...options,
      });
      loops.push(startWebhookDelivery(webhooks));
      return webhooks;
    }

    async function hook(webhooks: Webhooks, wallet: string, url: string): Promise<string> {
      const id = newId("wh");
      await insertWebhook(db, { id, wallet, url, events: ["credit.topup"], sealedSecret: webhooks.secrets.seal(SECRET, id) });
      return id;
    }

    const emit = (wallet: string, n: number) => db.transaction((tx) => emitEvent(tx, { account: wallet, name: "credit.topup", data: { n } }));

    test("a later event waits while an earlier one is retried; a redirect is a failure", async () => {
      const webhooks = await node(db);
      await hook(webhooks, "W-order", `${receiver.origin}/order`);
      receiver.script("/order", (d, nth) => (d.envelope.data.n === 1 && nth <= 2 ? (nth === 1 ? 302 : 500) : 200));
      for (const n of [1, 2, 3]) await emit("W-order", n);
      const got = await receiver.waitFor("/order", 5);
      assert.deepEqual(got.map((d) => d.envelope.data.n), [1, 1, 1, 2, 3]);
    });

    test("no complete answer within the timeout is a failed attempt", async () => {
      const webhooks = await node(db, { deliveryTimeoutMs: 300 });
      const id = await hook(webhooks, "W-slow", `${receiver.origin}/slow`);
      receiver.script("/slow", (_, nth) => (nth === 1 ? "hang" : 200));
      const started = Date.now();
      await emit("W-slow", 1);
      await receiver.waitFor("/slow", 2);
      assert.ok(Date.now() - started >= 300);
      let done: { status: string; attempts: number } | undefined;
      for (let i = 0; i < 200 && done?.status !== "delivered"; i++) {
        await new Promise((r) => setTimeout(r, 5));
        [done] = await db.query<{ status: string; attempts: number }>("SELECT status, attempts FROM webhook_deliveries WHERE webhook_id = $1", [id]);
      }
      assert.equal(done!.status, "delivered");
      assert.equal(done!.attempts, 2);
    });

    test("the address is checked again at delivery, and the connection goes to the address checked", async () => {
      // Staged DNS: receiver.test is known to no real resolver, so a delivery that arrives went to
      // the pinned address, with TLS still verifying the name. Then the name turns private.
      let answer = "127.0.0.1";
      const resolve: Resolver = async (host) => (host === "receiver.test" ? [{ address: answer, family: 4 }] : []);
      const webhooks = await node(db, { resolve });
      const id = await hook(webhooks, "W-dns", `https://receiver.test:${receiver.port}/dns`);
      await emit("W-dns", 1);
      const [first] = await receiver.waitFor("/dns", 1);
      assert.ok(first!.verified);

      answer = "10.0.0.7";
      await emit("W-dns", 2);
      let row: { attempts: number; last_error: string | null } | undefined;
      for (let i = 0; i < 200 && !(row && row.attempts > 0); i++) {
        await new Promise((r) => setTimeout(r, 5));
        [row] = await db.query<{ attempts: number; last_error: string | null }>(
          "SELECT d.attempts, d.last_error FROM webhook_deliveries d JOIN events e ON e.id = d.event_id WHERE d.webhook_id = $1 AND d.status = 'pending'",
          [id],
        );
      }
      assert.match(row!.last_error ?? "", /10\.0\.0\.7/);
      assert.equal(receiver.at("/dns").length, 1, "nothing was sent");
    });

    test("two gateway nodes on one database deliver every event exactly once, in order", async () => {
      let other: Db = db;
      if (db.kind === "postgres") {
        const [{ schema }] = (await db.query<{ schema: string }>("SELECT current_schema() AS schema")) as [{ schema: string }];
        other = await openDb({ databaseUrl: process.env.DATABASE_URL!, schema });
      }
      try {
        const a = await node(db);
        await node(other);
        const paths = ["/n0", "/n1", "/n2", "/n3"];
        for (const [i, path] of paths.entries()) await hook(a, `W-nodes-${i}`, `${receiver.origin}${path}`);
        for (let n = 0; n < 8; n++) for (let i = 0; i < paths.length; i++) await emit(`W-nodes-${i}`, n);
        for (const path of paths) {
          const got = await receiver.waitFor(path, 8);
          assert.deepEqual(got.map((d) => d.envelope.data.n), [0, 1, 2, 3, 4, 5, 6, 7], path);
        }
        await new Promise((r) => setTimeout(r, 100));
        for (const path of paths) assert.equal(receiver.at(path).length, 8, `${path}: no duplicates`);
      } finally {
        for (const loop of loops.splice(0)) await loop.stop();
        if (other !== db) await other.close();
      }
    });
  });
}
