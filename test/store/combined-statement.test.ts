/**
 * A combined statement carries several parts' writes as one statement: every step runs, its
 * parameters are numbered after the steps before it, one step's result is what it returns, and
 * a failing step undoes the others. Its VALUES lists are padded to a power of two rows, so a
 * group's size does not make a statement text (and a plan) of its own. On SQLite the steps run
 * one by one in a transaction, each reading what the earlier ones returned.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { addValues, CombinedStatement, returning, sqlState, unpadded, type Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";

for (const backend of testDatabases({ sqlite: true })) {
  describe(`combined statements on ${backend.name}`, () => {
    let db: Db;
    before(async () => {
      db = await backend.open();
      await db.exec(`
        CREATE TABLE notes (id text PRIMARY KEY, body text NOT NULL);
        CREATE TABLE tallies (name text PRIMARY KEY, n bigint NOT NULL CHECK (n >= 0))`);
    });
    after(() => db.close());

    /** Two parts' writes: notes (which returns what it wrote) and a tally's change. */
    function notesAndTally(notes: [string, string][], tally: string, change: bigint): CombinedStatement {
      const statement = new CombinedStatement(db);
      statement.step("tally_changed", `UPDATE tallies SET n = n + ${statement.param(change, "bigint")} WHERE name = ${statement.param(tally, "text")}`);
      statement.step("notes_written", `INSERT INTO notes (id, body) ${unpadded(statement.values(["text", "text"], notes))} RETURNING id`, ["id"]);
      statement.returns("SELECT id FROM notes_written ORDER BY id");
      return statement;
    }

    it("runs every step, each with its own parameters, and returns the one result", async () => {
      await db.query("INSERT INTO tallies (name, n) VALUES ('a', 1), ('b', 1)");
      const rows = await notesAndTally([["n2", "second"], ["n1", "first"]], "b", 5n).run<{ id: string }>(db);
      assert.deepEqual(rows, [{ id: "n1" }, { id: "n2" }]);
      assert.deepEqual(await db.query("SELECT name, n FROM tallies ORDER BY name"), [{ name: "a", n: 1n }, { name: "b", n: 6n }]);
      assert.deepEqual(await db.query("SELECT id, body FROM notes ORDER BY id"), [{ id: "n1", body: "first" }, { id: "n2", body: "second" }]);
    });

    it("writes nothing when one step fails", async () => {
      const before = await db.query("SELECT name, n FROM tallies ORDER BY name");
      // The tally cannot go below zero: its step fails, and the notes' step with it.
      await assert.rejects(notesAndTally([["n3", "third"]], "a", -2n).run(db), (e) => sqlState(e) === "23514");
      assert.deepEqual(await db.query("SELECT name, n FROM tallies ORDER BY name"), before);
      assert.deepEqual(await db.query("SELECT id FROM notes WHERE id = 'n3'"), []);
    });

    it("runs inside a transaction like any statement, and without steps runs nothing", async () => {
      await db.transaction(async (tx) => {
        assert.deepEqual(await new CombinedStatement(tx).run(tx), []);
        const written = new CombinedStatement(tx);
        written.step("notes_written", `INSERT INTO notes (id, body) ${unpadded(written.values(["text", "text"], [["n4", "fourth"]]))}`);
        assert.deepEqual(await written.run(tx), [], "no step's result was asked for");
      });
      assert.deepEqual(await db.query("SELECT body FROM notes WHERE id = 'n4'"), [{ body: "fourth" }]);
    });

    it("hands a step's returned rows to the steps after it and to the result, none as well as some", async () => {
      await db.query("INSERT INTO tallies (name, n) VALUES ('written', 0), ('none', 0)");
      const run = async (notes: [string, string][]) => {
        const statement = new CombinedStatement(db);
        statement.step("notes_written", `INSERT INTO notes (id, body) ${unpadded(statement.values(["text", "text"], notes))} RETURNING id, body`, ["id", "body"]);
        statement.step("counted", `UPDATE tallies SET n = n + (SELECT count(*) FROM notes_written) WHERE name = ${statement.param(notes.length > 0 ? "written" : "none", "text")}`);
        statement.returns("SELECT id, body FROM notes_written ORDER BY id");
        return statement.run<{ id: string; body: string }>(db);
      };
      assert.deepEqual(await run([["h2", "b"], ["h1", "a"]]), [{ id: "h1", body: "a" }, { id: "h2", body: "b" }]);
      assert.deepEqual(await run([]), []);
      assert.deepEqual(await db.query("SELECT name, n FROM tallies WHERE name IN ('written', 'none') ORDER BY name"), [{ name: "none", n: 0n }, { name: "written", n: 2n }]);
    });

    it("refuses two steps of one name, a second result, and a row of the wrong width", () => {
      const statement = new CombinedStatement(db);
      statement.step("notes_written", "SELECT 1");
      assert.throws(() => statement.step("notes_written", "SELECT 2"), /named notes_written already/);
      statement.returns("SELECT 1");
      assert.throws(() => statement.returns("SELECT 2"), /result is given already/);
      assert.throws(() => statement.values(["text", "text"], [["only one"]]), /a row of 1 values for 2 columns/);
      assert.throws(() => statement.values(["text", "text"], [[null, "no id"]]), /first value marks it as padding/);
    });

    it("pads a VALUES list to a power of two rows, which no insert or join takes", async () => {
      const texts = new Set<string>();
      for (const count of [5, 6, 8]) {
        const notes = Array.from({ length: count }, (_, i): [string, string] => [`p${count}-${i}`, `padded ${i}`]);
        const params: unknown[] = [];
        const list = addValues(params, ["text", "text"], notes);
        assert.equal(params.length, 16, "eight rows of two columns, the last ones NULL");
        const sql = `INSERT INTO notes (id, body) ${unpadded(list)} RETURNING id`;
        texts.add(sql);
        assert.equal((await db.query(sql, params)).length, count);
      }
      assert.equal(texts.size, 1, "one text for five to eight rows");
      assert.deepEqual(await db.query("SELECT count(*) AS n FROM notes WHERE id LIKE 'p%'"), [{ n: 19n }]);
      // A row of padding joins nothing: the update touches exactly the three notes named.
      const statement = new CombinedStatement(db);
      const changes = statement.table(["text", "text"], [["p5-0", "zero"], ["p5-1", "one"], ["p5-2", "two"]], "c", ["id", "body"]);
      statement.step("notes_changed", `UPDATE notes AS n SET body = c.body FROM ${changes} WHERE n.id = c.id ${returning(db, "n", ["id"])}`, ["id"]);
      statement.returns("SELECT id FROM notes_changed ORDER BY id");
      assert.deepEqual(await statement.run(db), [{ id: "p5-0" }, { id: "p5-1" }, { id: "p5-2" }]);
      assert.equal(statement.params.length, 8, "three rows padded to four");
    });
  });
}
