/**
 * The stored keys: a request claims its key with one insert before it runs, links the job it
 * started, then records its outcome, or lets the key go when it ended before anything ran. The
 * insert, not a read before it, decides which of two concurrent requests runs.
 */
import { randomBytes } from "node:crypto";
import { minusMs, type Db } from "../store/index.ts";
import { ABANDONED_CLAIM_MS, KEY_TTL_MS } from "./rules.ts";

/** Expired keys are deleted at most this often, by a node that is claiming one anyway. */
const SWEEP_INTERVAL_MS = 10 * 60 * 1000;

/** A key as another request with it sees it. */
export interface KeyRow {
  fingerprint: string;
  jobId: string | null;
  /** What the first request answered; undefined while it runs. */
  outcome: unknown;
}

/** The key is this request's (`claim` names it), or `row` is the first request's (undefined if it just let the key go). */
export type Claim = { claim: string } | { claim?: undefined; row: KeyRow | undefined };

interface Row {
  fingerprint: string;
  job_id: string | null;
  outcome: string | null;
}

export class IdempotencyKeys {
  private nextSweepMs = 0;

  constructor(private readonly db: Db) {}

  /**
   * Claims `key` for a request, in one statement: a new key, one older than KEY_TTL_MS, or one
   * abandoned by a node that stopped before its request started a job. Otherwise returns the row.
   */
  async claim(wallet: string, key: string, fingerprint: string): Promise<Claim> {
    const claim = randomBytes(16).toString("hex");
    const taken = await this.db.query(
      `INSERT INTO idempotency_keys (wallet, key, fingerprint, claim, created_at, updated_at) VALUES ($1, $2, $3, $4, now(), now())
       ON CONFLICT (wallet, key) DO UPDATE SET fingerprint = excluded.fingerprint, claim = excluded.claim, job_id = NULL, outcome = NULL,
         created_at = excluded.created_at, updated_at = excluded.updated_at
       WHERE idempotency_keys.created_at < ${this.ago("$5")}
          OR (idempotency_keys.outcome IS NULL AND idempotency_keys.job_id IS NULL AND idempotency_keys.updated_at < ${this.ago("$6")})
       RETURNING 1`,
      [wallet, key, fingerprint, claim, KEY_TTL_MS, ABANDONED_CLAIM_MS],
    );
    if (Date.now() >= this.nextSweepMs) {
      this.nextSweepMs = Date.now() + SWEEP_INTERVAL_MS;
      await this.sweep();
    }
    return taken.length === 1 ? { claim } : { row: await this.read(wallet, key) };
  }

  /** The key's row while it is kept; an expired one reads as none. */
  async read(wallet: string, key: string): Promise<KeyRow | undefined> {
    const [row] = await this.db.query<Row>(
      `SELECT fingerprint, job_id, outcome FROM idempotency_keys WHERE wallet = $1 AND key = $2 AND created_at >= ${this.ago("$3")}`,
      [wallet, key, KEY_TTL_MS],
    );
    return row && { fingerprint: row.fingerprint, jobId: row.job_id, outcome: row.outcome === null ? undefined : JSON.parse(row.outcome) };
  }

  /** The job the claiming request started: a retry that finds the request still running names it. */
  async linkJob(wallet: string, key: string, claim: string, jobId: string): Promise<void> {
    await this.db.query("UPDATE idempotency_keys SET job_id = $4, updated_at = now() WHERE wallet = $1 AND key = $2 AND claim = $3", [wallet, key, claim, jobId]);
  }

  /** The outcome every later request with the key is answered with. */
  async record(wallet: string, key: string, claim: string, outcome: unknown): Promise<void> {
    await this.db.query("UPDATE idempotency_keys SET outcome = $4, updated_at = now() WHERE wallet = $1 AND key = $2 AND claim = $3", [
      wallet,
      key,
      claim,
      JSON.stringify(outcome),
    ]);
  }

  /**
   * Claims anew a key whose first request started `jobId` and never answered (its node stopped),
   * once that job ended with nothing charged: the retry runs as a new request. Undefined when the
   * row moved on meanwhile (an outcome, or another retry's claim).
   */
  async reclaim(wallet: string, key: string, fingerprint: string, jobId: string): Promise<string | undefined> {
    const claim = randomBytes(16).toString("hex");
    const taken = await this.db.query(
      `UPDATE idempotency_keys SET claim = $5, job_id = NULL, created_at = now(), updated_at = now()
       WHERE wallet = $1 AND key = $2 AND fingerprint = $3 AND job_id = $4 AND outcome IS NULL RETURNING 1`,
      [wallet, key, fingerprint, jobId, claim],
    );
    return taken.length === 1 ? claim : undefined;
  }

  /** Records the outcome of a key whose first request started `jobId` and never answered, unless one was recorded meanwhile. */
  async recordUnanswered(wallet: string, key: string, jobId: string, outcome: unknown): Promise<void> {
    await this.db.query("UPDATE idempotency_keys SET outcome = $4, updated_at = now() WHERE wallet = $1 AND key = $2 AND job_id = $3 AND outcome IS NULL", [
      wallet,
      key,
      jobId,
      JSON.stringify(outcome),
    ]);
  }

  /** Lets the key go: the request ended before anything ran, so a retry runs anew. */
  async release(wallet: string, key: string, claim: string): Promise<void> {
    await this.db.query("DELETE FROM idempotency_keys WHERE wallet = $1 AND key = $2 AND claim = $3 AND outcome IS NULL", [wallet, key, claim]);
  }

  /** Deletes the keys past KEY_TTL_MS. */
  async sweep(): Promise<number> {
    const rows = await this.db.query(`DELETE FROM idempotency_keys WHERE created_at < ${this.ago("$1")} RETURNING 1`, [KEY_TTL_MS]);
    return rows.length;
  }

  /** The database's time the milliseconds in parameter `param` ago: every node shares its clock. */
  private ago(param: string): string {
    return minusMs(this.db, "now()", `${param}::float8`);
  }
}
