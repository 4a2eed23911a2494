/**
 * Group commit: items handed in during one turn of the event loop share one transaction; a
 * group that fails is rolled back whole and its items are done again one at a time, so only the
 * failing one fails; results come back in order. A group whose work is one statement runs it with
 * no transaction around it. On each backend, against a real table.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { GroupCommit, isTransaction, valuesList, type Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";

for (const backend of testDatabases()) {
  describe(`group commit on ${backend.name}`, () => {
    let db: Db;
    /** The groups the work function was called with, by their items. */
    let groups: string[][];
    let commits: GroupCommit<string, number>;
    before(async () => {
      db = await backend.open();
      await db.exec("CREATE TABLE names (seq bigint GENERATED ALWAYS AS IDENTITY, name text PRIMARY KEY CHECK (name <> 'bad'))");
      // Inserts every item in one statement and answers each one's sequence number.
      commits = new GroupCommit(db, async (tx, names) => {
        groups.push([...names]);
        const rows = await tx.query<{ name: string; seq: bigint }>(`INSERT INTO names (name) VALUES ${valuesList(names.length, ["text"])} RETURNING name, seq`, [...names]);
        return names.map((name) => Number(rows.find((row) => row.name === name)!.seq));
      });
    });
    after(() => db.close());

    const stored = async () => (await db.query<{ name: string }>("SELECT name FROM names ORDER BY seq")).map((row) => row.name);

    it("commits the items handed in together in one transaction, answering each in order", async () => {
      groups = [];
      const answers = await Promise.all(["a", "b", "c", "d"].map((name) => commits.run(name)));
      assert.deepEqual(groups, [["a", "b", "c", "d"]]);
      assert.deepEqual(answers, [...answers].sort((x, y) => x - y), "sequence numbers follow the order handed in");
      assert.equal(new Set(answers).size, 4);
      assert.deepEqual(await stored(), ["a", "b", "c", "d"]);
    });

    it("redoes a failed group one item at a time: only the failing item fails", async () => {
      groups = [];
      const results = await Promise.allSettled(["e", "bad", "f"].map((name) => commits.run(name)));
      assert.deepEqual(groups, [["e", "bad", "f"], ["e"], ["bad"], ["f"]]);
      assert.equal(results[0]!.status, "fulfilled");
      assert.equal(results[2]!.status, "fulfilled");
      assert.equal(results[1]!.status, "rejected");
      assert.match(String((results[1] as PromiseRejectedResult).reason), /check constraint/);
      // The group's own insert of e and f was rolled back; they are stored once, by their retries.
      assert.deepEqual((await stored()).slice(-2), ["e", "f"]);
    });

    it("forms the next group from what arrived while one was committing", async () => {
      groups = [];
      const first = commits.run("g");
      await new Promise((resolve) => setImmediate(resolve));
      // The first group's transaction is under way now; these wait for the next one.
      const later = ["h", "i"].map((name) => commits.run(name));
      await Promise.all([first, ...later]);
      assert.deepEqual(groups, [["g"], ["h", "i"]]);
    });

    it("runs a group whose work is one statement on the database itself, with no transaction", async () => {
      const seen: { inTransaction: boolean; names: string[] }[] = [];
      const oneStatement = new GroupCommit<string, number>(
        db,
        async (target, names) => {
          seen.push({ inTransaction: isTransaction(target), names: [...names] });
          const rows = await target.query<{ name: string; seq: bigint }>(`INSERT INTO names (name) VALUES ${valuesList(names.length, ["text"])} RETURNING name, seq`, [...names]);
          return names.map((name) => Number(rows.find((row) => row.name === name)!.seq));
        },
        { oneStatement: true },
      );
      const results = await Promise.allSettled(["j", "bad", "k"].map((name) => oneStatement.run(name)));
      assert.deepEqual(seen, [["j", "bad", "k"], ["j"], ["bad"], ["k"]].map((names) => ({ inTransaction: false, names })));
      assert.deepEqual(results.map((r) => r.status), ["fulfilled", "rejected", "fulfilled"]);
      // The failed statement wrote nothing by itself: j and k are stored once, by their retries.
      assert.deepEqual((await stored()).slice(-2), ["j", "k"]);
    });
  });
}
