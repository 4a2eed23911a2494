import assert from "node:assert/strict";
import { mkdir, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { migrate, openDb } from "../../src/store/index.ts";
import { initializeInOwnProcess } from "../../src/store/pglite.ts";

it("PGlite keeps its data across close and reopen of the same data dir", async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "svc-store-"));
  try {
    const first = await openDb({ dataDir, embedded: "pglite" });
    assert.equal(first.kind, "pglite");
    await migrate(first, [{ id: "test/001", sql: "CREATE TABLE kept (n bigint)" }]);
    await first.query("INSERT INTO kept VALUES ($1)", [2n ** 60n]);
    await first.close();
    assert.ok((await stat(join(dataDir, "pgdata"))).isDirectory());

    const second = await openDb({ dataDir, embedded: "pglite" });
    try {
      assert.deepEqual(await second.query("SELECT n FROM kept"), [{ n: 2n ** 60n }]);
      assert.deepEqual(await migrate(second, [{ id: "test/001", sql: "CREATE TABLE kept (n bigint)" }]), []);
    } finally {
      await second.close();
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});

it("a new data dir is initialized in a process of its own, which reports its failure", async () => {
  const root = await mkdtemp(join(tmpdir(), "svc-store-"));
  try {
    const dir = join(root, "pgdata");
    await mkdir(dir);
    await initializeInOwnProcess(dir);
    assert.ok((await stat(join(dir, "PG_VERSION"))).isFile(), "initdb ran in the child process");
    // A data dir where a file stands: initdb fails there, and the caller hears it.
    const blocked = join(root, "blocked");
    await writeFile(blocked, "not a directory");
    await assert.rejects(initializeInOwnProcess(blocked), /PGlite could not initialize a database in .*blocked/);
  } finally {
    await rm(root, { recursive: true, force: true });
  }
});
