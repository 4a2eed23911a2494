/**
 * The embedded database checkpoints itself (PGlite runs no checkpointer): once enough log was
 * written since the last checkpoint, and only then, so its log's folder stops growing with what
 * the node writes; and a node's database does it on its own upkeep schedule. After a checkpoint
 * it logs changes, not whole pages: a process it runs in cannot leave a page half written.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { it } from "node:test";
import { migrate, openDb, type Db } from "../../src/store/index.ts";
import { checkpointIfDue, CHECKPOINT_AFTER_WAL_BYTES } from "../../src/store/pglite-checkpoint.ts";

const MB = 1024 * 1024;

/** Bytes of log written since the database was created. */
async function logWritten(db: Db): Promise<number> {
  const [row] = await db.query<{ at: bigint }>("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint AS at");
  return Number(row!.at);
}

async function lastCheckpointBegan(db: Db): Promise<string> {
  const [row] = await db.query<{ redo: string }>("SELECT redo_lsn::text AS redo FROM pg_control_checkpoint()");
  return row!.redo;
}

/** Writes rows until at least `bytes` more of log exist. */
async function writeLog(db: Db, bytes: number): Promise<void> {
  const until = (await logWritten(db)) + bytes;
  while ((await logWritten(db)) < until) await db.query("INSERT INTO notes (body) SELECT repeat('x', 1000) FROM generate_series(1, 500)");
}

async function folderBytes(dir: string): Promise<number> {
  const sizes = await Promise.all((await readdir(dir)).map(async (name) => (await stat(join(dir, name))).size));
  return sizes.reduce((a, b) => a + b, 0);
}

async function withDatabase(run: (db: Db, pgdata: string) => Promise<void>): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), "svc-checkpoint-"));
  const db = await openDb({ dataDir, embedded: "pglite" });
  try {
    await migrate(db, [{ id: "test/001", sql: "CREATE TABLE notes (id serial PRIMARY KEY, body text NOT NULL)" }]);
    await run(db, join(dataDir, "pgdata"));
  } finally {
    await db.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

it("checkpoints only past the threshold, and the log's folder stays small however much is written", async () => {
  await withDatabase(async (db, pgdata) => {
    const threshold = BigInt(8 * MB);
    await writeLog(db, 9 * MB);
    assert.equal(await checkpointIfDue(db, threshold), true, "9 MB written since the last checkpoint");
    assert.equal(await checkpointIfDue(db, threshold), false, "nothing written since");
    const began = await logWritten(db);
    for (let round = 0; round < 10; round++) {
      await writeLog(db, 16 * MB);
      const before = await lastCheckpointBegan(db);
      assert.equal(await checkpointIfDue(db, threshold), true);
      assert.notEqual(await lastCheckpointBegan(db), before);
    }
    const written = (await logWritten(db)) - began;
    const kept = await folderBytes(join(pgdata, "pg_wal"));
    assert.ok(written >= 160 * MB, `${written} bytes of log written`);
    assert.ok(kept <= written / 2, `the log's folder holds ${kept} bytes after ${written} were written`);
    const [count] = await db.query<{ n: number }>("SELECT count(*)::int AS n FROM notes");
    assert.ok(count!.n > 100_000);
  });
});

it("a node's embedded database checkpoints by itself once enough log was written", async () => {
  await withDatabase(async (db) => {
    const before = await lastCheckpointBegan(db);
    await writeLog(db, Number(CHECKPOINT_AFTER_WAL_BYTES) + 4 * MB);
    // Its upkeep runs every 10 s (auto-vacuum.ts).
    const deadline = Date.now() + 15_000;
    while ((await lastCheckpointBegan(db)) === before && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 200));
    assert.notEqual(await lastCheckpointBegan(db), before, "no checkpoint within 15 s");
  });
});

/** Runs the writer fixture until it has checkpointed `checkpoints` times, then kills it; returns the last commit it announced. */
async function writeUntilKilled(dataDir: string, checkpoints: number): Promise<number> {
  const child = spawn(process.execPath, ["--import", "tsx", join(import.meta.dirname, "fixtures", "pglite-writer.ts"), dataDir], { stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on("exit", (_code, signal) => resolve(signal)));
  const watchdog = setTimeout(() => child.kill("SIGKILL"), 60_000);
  let committed = 0;
  let checkpointed = 0;
  for await (const line of createInterface({ input: child.stdout })) {
    const event = JSON.parse(line) as { committed?: number; checkpoint?: number };
    committed = event.committed ?? committed;
    if (event.checkpoint !== undefined) checkpointed++;
    // Killed a few commits past the checkpoint: those are replayed from the log alone.
    if (checkpointed >= checkpoints && committed % 50 === 25 && !child.killed) child.kill("SIGKILL");
  }
  clearTimeout(watchdog);
  assert.equal(await exited, "SIGKILL");
  assert.ok(checkpointed >= checkpoints, `${checkpointed} checkpoints before the minute ran out`);
  return committed;
}

it("logs changes without whole pages after a checkpoint, and comes back with every commit after a kill", async () => {
  const dataDir = await mkdtemp(join(tmpdir(), "svc-checkpoint-kill-"));
  try {
    const committed = await writeUntilKilled(dataDir, 3);
    const db = await openDb({ dataDir, embedded: "pglite" });
    try {
      assert.deepEqual(await db.query("SHOW full_page_writes"), [{ full_page_writes: "off" }]);
      const [rows] = await db.query<{ n: number; top: number; whole: number }>(
        "SELECT count(*)::int AS n, max(n) AS top, count(*) FILTER (WHERE body = repeat(md5(n::text), 64))::int AS whole FROM numbered",
      );
      assert.ok(rows!.n >= committed && rows!.top === rows!.n && rows!.whole === rows!.n, `${JSON.stringify(rows)} after ${committed} announced commits`);
      // Through the primary key's index as well as the table.
      assert.deepEqual(await db.query("SELECT n FROM numbered WHERE n = $1", [committed]), [{ n: committed }]);
      await db.query("INSERT INTO numbered VALUES ($1, 'after')", [rows!.n + 1]);
    } finally {
      await db.close();
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
});
