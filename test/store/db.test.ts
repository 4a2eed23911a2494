import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { sqlState, type Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";

for (const backend of testDatabases()) {
  describe(`store on ${backend.name}`, () => {
    let db: Db;
    before(async () => {
      db = await backend.open();
      await db.exec(`
        CREATE TABLE items (id text PRIMARY KEY, n bigint NOT NULL DEFAULT 0);
        CREATE TABLE typed (big bigint, bigs bigint[], at timestamptz, doc jsonb, dec numeric, i int)`);
    });
    after(() => db.close());

    const count = async (conn: Db = db) => (await conn.query<{ c: bigint }>("SELECT count(*) AS c FROM items"))[0]!.c;

    it("reports its kind", () => {
      assert.equal(db.kind, backend.name);
    });

    it("returns int8 as bigint, timestamptz as Date, jsonb as objects, numeric as string", async () => {
      const big = 2n ** 62n + 7n;
      const at = new Date("2026-11-21T10:00:00.123Z");
      await db.query("INSERT INTO typed VALUES ($1, $2, $3, $4, $5, $6)", [big, [1n, -2n, big], at, { a: [1, "x"] }, "1.50", 5]);
      const [row] = await db.query("SELECT big, bigs, at, doc, dec, i, count(*) OVER () AS c FROM typed");
      assert.deepEqual(row, { big, bigs: [1n, -2n, big], at, doc: { a: [1, "x"] }, dec: "1.50", i: 5, c: 1n });
    });

    // On PGlite, statements inside a transaction run as prepared statements after their first run.
    it("reads and writes every type the same inside transactions, the first time and after", async () => {
      await db.exec("CREATE TABLE typed_tx (big bigint, bigs bigint[], at timestamptz, doc jsonb, bytes bytea, label text)");
      const insert = "INSERT INTO typed_tx VALUES ($1, $2, $3, $4, $5, $6) RETURNING big, bigs, at, doc, bytes, label";
      const rows = [
        { big: 2n ** 62n + 7n, bigs: [1n, -2n], at: new Date("2026-11-21T10:00:00.123Z"), doc: { a: [1, "x"] }, bytes: new Uint8Array([0, 255, 7]), label: "first" },
        { big: -5n, bigs: [], at: new Date("2027-01-01T00:00:00.000Z"), doc: { list: [null, true] }, bytes: new Uint8Array([]), label: "second" },
        { big: null, bigs: null, at: null, doc: null, bytes: null, label: null },
        // A view into a larger buffer: only its own bytes are written.
        { big: 1n, bigs: [1n], at: new Date("2027-01-02T00:00:00.000Z"), doc: {}, bytes: new Uint8Array([9, 1, 2, 3, 9]).subarray(1, 4), label: "third" },
      ];
      for (const row of rows) {
        const returned = await db.transaction((tx) => tx.query<{ bytes: Uint8Array | null }>(insert, Object.values(row)));
        // bytea comes back as a Buffer from pg, a Uint8Array from PGlite: the bytes are what count.
        assert.deepEqual(returned.map((r) => ({ ...r, bytes: r.bytes && new Uint8Array(r.bytes) })), [row]);
      }
      const labels = await db.transaction((tx) => tx.query<{ label: string }>("SELECT label FROM typed_tx WHERE label = ANY($1::text[]) ORDER BY label", [["second", "first", "none"]]));
      assert.deepEqual(labels, [{ label: "first" }, { label: "second" }]);
    });

    it("reports a failed statement inside a transaction with its SQLSTATE, the first time and after", async () => {
      await db.query("INSERT INTO items (id) VALUES ('taken')");
      for (let attempt = 0; attempt < 2; attempt++) {
        await assert.rejects(
          db.transaction((tx) => tx.query("INSERT INTO items (id) VALUES ($1)", ["taken"])),
          (err) => sqlState(err) === "23505",
        );
      }
      assert.deepEqual(await db.transaction((tx) => tx.query("SELECT id FROM items WHERE id = $1", ["taken"])), [{ id: "taken" }]);
    });

    it("commits a transaction and returns its result", async () => {
      const result = await db.transaction(async (tx) => {
        await tx.query("INSERT INTO items (id) VALUES ('committed')");
        return "done";
      });
      assert.equal(result, "done");
      assert.equal((await db.query("SELECT id FROM items WHERE id = 'committed'")).length, 1);
    });

    it("rolls back everything when the callback throws", async () => {
      const before = await count();
      await assert.rejects(
        db.transaction(async (tx) => {
          await tx.query("INSERT INTO items (id) VALUES ('rolled-back')");
          throw new Error("boom");
        }),
        /boom/,
      );
      assert.equal(await count(), before);
    });

    it("runs a nested transaction as a savepoint the outer one survives", async () => {
      await db.transaction(async (tx) => {
        await tx.query("INSERT INTO items (id) VALUES ('outer')");
        await assert.rejects(
          tx.transaction(async (inner) => {
            await inner.query("INSERT INTO items (id) VALUES ('inner')");
            await inner.query("INSERT INTO items (id) VALUES ('inner')"); // duplicate key
          }),
          (err) => sqlState(err) === "23505",
        );
        await tx.transaction((inner) => inner.query("INSERT INTO items (id) VALUES ('inner-kept')"));
      });
      const ids = (await db.query<{ id: string }>("SELECT id FROM items WHERE id LIKE 'inner%' OR id = 'outer' ORDER BY id")).map((r) => r.id);
      assert.deepEqual(ids, ["inner-kept", "outer"]);
    });

    it("refuses to commit a transaction whose error the callback swallowed", async () => {
      await db.query("INSERT INTO items (id) VALUES ('dup')");
      await assert.rejects(
        db.transaction(async (tx) => {
          await tx.query("INSERT INTO items (id) VALUES ('swallowed')");
          await tx.query("INSERT INTO items (id) VALUES ('dup')").catch(() => {});
        }),
      );
      assert.equal((await db.query("SELECT id FROM items WHERE id = 'swallowed'")).length, 0);
    });

    it("keeps a concurrent plain query out of an open transaction", async () => {
      const before = await count();
      const seen: bigint[] = [];
      const tx = db.transaction(async (t) => {
        await t.query("INSERT INTO items (id) VALUES ('half-1')");
        await sleep(50);
        seen.push(await count(t));
        await t.query("INSERT INTO items (id) VALUES ('half-2')");
        throw new Error("abort after two writes");
      });
      // Handled from the start: on a slow machine the transaction may end before the outside query returns.
      const aborted = assert.rejects(tx, /abort/);
      await sleep(10);
      seen.push(await count());
      await aborted;
      assert.equal(await count(), before);
      // The transaction saw its own write; the outside query never saw a half-done transaction.
      assert.ok(seen.includes(before + 1n));
      assert.ok(seen.filter((c) => c !== before + 1n).every((c) => c === before));
    });

    it("refuses a handle used after its transaction ended", async () => {
      let leaked: Db | undefined;
      await db.transaction(async (tx) => {
        leaked = tx;
      });
      await assert.rejects(leaked!.query("SELECT 1"), /ended/);
    });

    it("passes SQLSTATE codes through", async () => {
      await assert.rejects(db.query("INSERT INTO items (id) VALUES ('committed')"), (err) => sqlState(err) === "23505");
    });

    if (backend.name === "pglite") {
      it("refuses a query on the Db inside its own transaction instead of hanging", async () => {
        await assert.rejects(
          db.transaction(async () => {
            await db.query("SELECT 1");
          }),
          /use the `tx` handle/,
        );
      });
    }

    it("gives each test database its own namespace", async () => {
      const other = await backend.open();
      try {
        await assert.rejects(other.query("SELECT * FROM items"), (err) => sqlState(err) === "42P01");
      } finally {
        await other.close();
      }
    });
  });
}
