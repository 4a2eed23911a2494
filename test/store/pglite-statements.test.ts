/**
 * A prepared statement's run is one message written in a single pass (bindExecuteSync): its bytes
 * must be exactly what PGlite's own protocol writer makes, for every kind of text value, and the
 * database must read the parameters back as they were sent.
 */
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { protocol } from "@electric-sql/pglite";
import { type Db } from "../../src/store/index.ts";
import { bindExecuteSync } from "../../src/store/pglite-statements.ts";
import { testDatabases } from "../support/db.ts";

const { serialize } = protocol;

function pgliteWriterBytes(statement: string, values: (string | null)[]): Buffer {
  return Buffer.concat([serialize.bind({ statement, values }), serialize.execute({}), serialize.sync()]);
}

const CASES: [string, (string | null)[]][] = [
  ["no parameters", []],
  ["one NULL", [null]],
  ["an empty string", [""]],
  ["text beyond ASCII", ["é", "日本語", "emoji 🚀"]],
  ["NULLs between values", ["a", null, "", null, "z"]],
  ["a long value", ["x".repeat(70_000)]],
  ["the parameters of a long VALUES list", Array.from({ length: 600 }, (_, i) => (i % 7 === 0 ? null : `value ${i} ✓`))],
];

describe("a prepared statement's Bind, Execute and Sync", () => {
  for (const [name, values] of CASES) {
    it(`are PGlite's own bytes: ${name}`, () => {
      assert.deepEqual(bindExecuteSync("svc_12", values), pgliteWriterBytes("svc_12", values));
    });
  }
  it("name a statement beyond ASCII as PGlite would", () => {
    assert.deepEqual(bindExecuteSync("sté", ["1"]), pgliteWriterBytes("sté", ["1"]));
  });
});

const pglite = testDatabases().find((backend) => backend.name === "pglite")!;

describe("parameters through a prepared statement on PGlite", () => {
  let db: Db;
  before(async () => {
    db = await pglite.open();
  });
  after(() => db.close());

  it("come back as they were sent, NULLs and multi-byte text included", async () => {
    const values = ["plain", null, "", "日本語 🚀", "x".repeat(20_000)];
    // Run twice: the first run prepares the statement, the second is a run of the kept plan.
    for (let round = 0; round < 2; round++) {
      const rows = await db.query<{ a: string | null; b: string | null; c: string | null; d: string | null; e: string | null }>(
        "SELECT $1::text AS a, $2::text AS b, $3::text AS c, $4::text AS d, $5::text AS e",
        values,
      );
      assert.deepEqual(rows, [{ a: values[0], b: values[1], c: values[2], d: values[3], e: values[4] }]);
    }
  });
});
