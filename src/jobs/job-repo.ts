/** SQL for the jobs table. The only code that reads or writes it. */
import type { Db } from "../store/db.ts";
import type { JobRecord, JobStatus } from "./job-record.ts";
import type { JobListQuery } from "./job-list-query.ts";

const COLUMNS: Record<keyof JobRecord, string> = {
  id: "id",
  wallet: "wallet",
  model: "model",
  tier: "tier",
  status: "status",
  lockedCredits: "locked_credits",
  maxTokens: "max_tokens",
  creditsCharged: "credits_charged",
  workerAddress: "worker_address",
  workerStaked: "worker_staked",
  escrowAddress: "escrow_address",
  escrowTx: "escrow_tx",
  settlementTx: "settlement_tx",
  refundTx: "refund_tx",
  slot: "slot",
  proofHash: "proof_hash",
  proofSignature: "proof_signature",
  promptTokens: "prompt_tokens",
  completionTokens: "completion_tokens",
  finishReason: "finish_reason",
  failureReason: "failure_reason",
  createdAt: "created_at",
  completedAt: "completed_at",
  lastTokenAt: "last_token_at",
};

const FIELDS = Object.keys(COLUMNS) as (keyof JobRecord)[];
const SELECT = `SELECT ${FIELDS.map((f) => COLUMNS[f]).join(", ")} FROM jobs`;

function fromRow(row: Record<string, unknown>): JobRecord {
  const job = {} as Record<string, unknown>;
  for (const field of FIELDS) job[field] = row[COLUMNS[field]];
  job.slot = row.slot === null || row.slot === undefined ? null : Number(row.slot);
  return job as unknown as JobRecord;
}

export async function insertJob(db: Db, job: JobRecord): Promise<void> {
  const placeholders = FIELDS.map((_, i) => `$${i + 1}`).join(", ");
  await db.query(
    `INSERT INTO jobs (${FIELDS.map((f) => COLUMNS[f]).join(", ")}) VALUES (${placeholders})`,
    FIELDS.map((f) => job[f]),
  );
}

/** Update some fields of a job. */
export async function updateJob(db: Db, id: string, changes: Partial<JobRecord>): Promise<void> {
  const fields = Object.keys(changes) as (keyof JobRecord)[];
  if (fields.length === 0) return;
  const sets = fields.map((f, i) => `${COLUMNS[f]} = $${i + 2}`).join(", ");
  await db.query(`UPDATE jobs SET ${sets} WHERE id = $1`, [id, ...fields.map((f) => changes[f])]);
}

export async function getJob(db: Db, id: string): Promise<JobRecord | undefined> {
  const rows = await db.query(`${SELECT} WHERE id = $1`, [id]);
  return rows[0] ? fromRow(rows[0]) : undefined;
}

export async function jobsWithStatus(db: Db, statuses: JobStatus[]): Promise<JobRecord[]> {
  const rows = await db.query(`${SELECT} WHERE status = ANY($1::text[]) ORDER BY id`, [statuses]);
  return rows.map(fromRow);
}

/**
 * A page of a wallet's jobs, newest first. `before` pages to older jobs; `after` returns the
 * `limit` jobs just newer than the cursor (still newest first). One extra row tells `has_more`.
 */
export async function listJobs(db: Db, wallet: string, query: JobListQuery): Promise<{ jobs: JobRecord[]; hasMore: boolean }> {
  const where = ["wallet = $1"];
  const params: unknown[] = [wallet];
  const add = (clause: string, value: unknown) => {
    params.push(value);
    where.push(clause.replace("?", `$${params.length}`));
  };
  if (query.before) add("id < ?", query.before);
  if (query.after) add("id > ?", query.after);
  if (query.status) add("status = ?", query.status);
  if (query.model) add("model = ?", query.model);
  // For `after`, the rows closest to the cursor are the oldest of the newer ones.
  const order = query.after ? "ASC" : "DESC";
  const rows = await db.query(`${SELECT} WHERE ${where.join(" AND ")} ORDER BY id ${order} LIMIT ${query.limit + 1}`, params);
  const hasMore = rows.length > query.limit;
  const jobs = rows.slice(0, query.limit).map(fromRow);
  if (query.after) jobs.reverse();
  return { jobs, hasMore };
}
