/**
 * Checkpoints of the embedded database. PostgreSQL's checkpointer process writes the buffered
 * pages out every few minutes or once max_wal_size of log has been written, and each checkpoint
 * lets the log before it go. PGlite runs PostgreSQL as a single backend with no checkpointer, and
 * nothing in it checkpoints while it runs: its write-ahead log keeps every record since it opened.
 * A loaded node writes about 15 KB of log a paid job, 2.5 GB after 164,000 jobs in ten minutes
 * (`npm run bench:soak`), and a restart after a kill -9 replays the log from the last checkpoint:
 * 16.8 s to open after 1.7 GB, against 2.3 s for the same database closed cleanly (timed by a
 * one-off script).
 *
 * So the node checkpoints its database itself, between statements (PGlite runs on this thread),
 * once CHECKPOINT_AFTER_WAL_BYTES of log have been written since the last checkpoint began. With
 * a 16 MB buffer cache (pglite.ts) a checkpoint has at most that much to write, and the log's folder
 * stays near the size of what is written between two checkpoints.
 */
import type { Db } from "./db.ts";

/** Bounds both the log kept on disk and what a restart after a crash replays. */
export const CHECKPOINT_AFTER_WAL_BYTES = 64n * 1024n * 1024n;

/** Checkpoints when more than `afterBytes` of log were written since the last checkpoint began; says whether it did. */
export async function checkpointIfDue(db: Db, afterBytes = CHECKPOINT_AFTER_WAL_BYTES): Promise<boolean> {
  const [row] = await db.query<{ written: bigint }>(
    "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), redo_lsn)::bigint AS written FROM pg_control_checkpoint()",
  );
  if (row!.written < afterBytes) return false;
  await db.exec("CHECKPOINT");
  return true;
}
