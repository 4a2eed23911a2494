/** SQL for the jobs table. The only code that reads or writes it. */
import { addValues, CombinedStatement, isAnyOf, returning, spelled, unpadded, valuesTable, type Db } from "../store/index.ts";
import type { JobRecord, JobStatus } from "./job-record.ts";
import type { JobListQuery } from "./job-list-query.ts";
import { isFinal, nextStatus, UNFINISHED_STATUSES, type JobTrigger } from "./job-states.ts";

/** Fields a step may write besides the status, which only `moveJob` changes. */
export type JobChanges = Partial<Omit<JobRecord, "id" | "status">>;

/** Another step moved the job first: the move it was guarded against did not happen. */
export class JobMovedError extends Error {
  override readonly name = "JobMovedError";
  constructor(readonly jobId: string, readonly expected: JobStatus, readonly trigger: JobTrigger) {
    super(`job ${jobId} was no longer ${expected} when ${trigger} tried to move it`);
  }
}

const COLUMNS: Record<keyof JobRecord, string> = {
  id: "id",
  wallet: "wallet",
  model: "model",
  tier: "tier",
  status: "status",
  creditsLocked: "locked_credits",
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
  request: "request",
  disputeHash: "dispute_hash",
  disputeTx: "dispute_tx",
  disputedAt: "disputed_at",
  disputeOutcome: "dispute_outcome",
  disputeResolveTx: "dispute_resolve_tx",
  disputeReturnedCredits: "dispute_returned_credits",
  disputeBondCredits: "dispute_bond_credits",
  auditOutcome: "audit_outcome",
  escrowClosed: "escrow_closed",
  escrowTableId: "escrow_table_id",
  escrowTableSlot: "escrow_table_slot",
  settlementLeaf: "settlement_leaf",
};

/** Each column's SQL type, for the VALUES lists of statements that write many rows. */
const TYPES: Record<keyof JobRecord, string> = {
  id: "text",
  wallet: "text",
  model: "text",
  tier: "text",
  status: "text",
  creditsLocked: "integer",
  maxTokens: "integer",
  creditsCharged: "integer",
  workerAddress: "text",
  workerStaked: "boolean",
  escrowAddress: "text",
  escrowTx: "text",
  settlementTx: "text",
  refundTx: "text",
  slot: "bigint",
  proofHash: "text",
  proofSignature: "text",
  promptTokens: "integer",
  completionTokens: "integer",
  finishReason: "text",
  failureReason: "text",
  createdAt: "timestamptz",
  completedAt: "timestamptz",
  lastTokenAt: "timestamptz",
  request: "text",
  disputeHash: "text",
  disputeTx: "text",
  disputedAt: "timestamptz",
  disputeOutcome: "text",
  disputeResolveTx: "text",
  disputeReturnedCredits: "integer",
  disputeBondCredits: "integer",
  auditOutcome: "text",
  escrowClosed: "boolean",
  escrowTableId: "bigint",
  escrowTableSlot: "integer",
  settlementLeaf: "text",
};

const FIELDS = Object.keys(COLUMNS) as (keyof JobRecord)[];
const SELECT = `SELECT ${FIELDS.map((f) => COLUMNS[f]).join(", ")} FROM jobs`;

function fromRow(row: Record<string, unknown>): JobRecord {
  const job = {} as Record<string, unknown>;
  for (const field of FIELDS) job[field] = row[COLUMNS[field]];
  job.slot = row.slot === null || row.slot === undefined ? null : Number(row.slot);
  job.escrowTableId = row.escrow_table_id === null || row.escrow_table_id === undefined ? null : Number(row.escrow_table_id);
  job.request = typeof row.request === "string" ? JSON.parse(row.request) : null;
  job.settlementLeaf = typeof row.settlement_leaf === "string" ? JSON.parse(row.settlement_leaf) : null;
  return job as unknown as JobRecord;
}

/** A field's value as its column holds it: the kept request and the settlement leaf are JSON text. */
function toColumn<F extends keyof JobRecord>(field: F, value: JobRecord[F] | undefined): unknown {
  return (field === "request" || field === "settlementLeaf") && value != null ? JSON.stringify(value) : value;
}

/**
 * A new job enters the table pending (newPendingJob); every later status comes from moveJob.
 * `nodeId`: the gateway node driving the job, whose lease covers it.
 */
export async function insertJob(db: Db, job: JobRecord, nodeId?: string): Promise<void> {
  if (job.status !== "pending") throw new Error(`a job is inserted pending, not ${job.status}`);
  const statement = new CombinedStatement(db);
  addJobRows(statement, [job], nodeId);
  await statement.run(db);
}

/**
 * New jobs admitted with their workers, as a step of `statement` (the admission's one statement
 * of writes): each enters the table already moved from pending by `worker_assigned` (the state
 * table's move, as moveJob would apply it), so admission writes each row once. Returns the rows
 * as they will be written; the records passed are left as they were, for the caller to update
 * once the transaction commits.
 */
export function addAssignedJobs(statement: CombinedStatement, admitted: readonly { job: JobRecord; worker: Pick<JobRecord, "workerAddress" | "workerStaked"> }[], nodeId?: string): JobRecord[] {
  const rows = admitted.map(({ job, worker }) => {
    if (job.status !== "pending") throw new Error(`a job is admitted pending, not ${job.status}`);
    return { ...job, ...worker, status: nextStatus(job.status, "worker_assigned") };
  });
  addJobRows(statement, rows, nodeId);
  return rows;
}

function addJobRows(statement: CombinedStatement, jobs: readonly JobRecord[], nodeId: string | undefined): void {
  const values = statement.values(
    [...FIELDS.map((f) => TYPES[f]), "text"],
    jobs.map((job) => [...FIELDS.map((f) => toColumn(f, job[f])), nodeId ?? null]),
  );
  statement.step("jobs_inserted", `INSERT INTO jobs (${FIELDS.map((f) => COLUMNS[f]).join(", ")}, node_id) ${unpadded(values)} RETURNING id, node_id`, ["id", "node_id"]);
  statement.step("job_queues_inserted", "INSERT INTO job_queues (queue, job_id, node_id) SELECT 'unfinished', id, node_id FROM jobs_inserted");
}

/** Update fields of a job other than its status, in whatever state it is. */
export async function updateJob(db: Db, id: string, changes: JobChanges): Promise<void> {
  const fields = Object.keys(changes) as (keyof JobChanges)[];
  if ((fields as string[]).includes("status")) throw new Error("a job's status changes only through moveJob");
  if (fields.length === 0) return;
  const sets = fields.map((f, i) => `${COLUMNS[f]} = $${i + 2}`).join(", ");
  await db.query(`UPDATE jobs SET ${sets} WHERE id = $1`, [id, ...fields.map((f) => toColumn(f, changes[f]))]);
}

/** `updateJob` for several jobs in one statement, each with its own values of the same fields. */
export async function updateJobs(db: Db, updates: readonly { id: string; changes: JobChanges }[]): Promise<void> {
  if (updates.length === 0) return;
  const fields = Object.keys(updates[0]!.changes) as (keyof JobChanges)[];
  if ((fields as string[]).includes("status")) throw new Error("a job's status changes only through moveJob");
  const params: unknown[] = [];
  const values = addValues(params, ["text", ...fields.map((f) => TYPES[f])], updates.map(({ id, changes }) => [id, ...fields.map((f) => toColumn(f, changes[f]))]));
  await db.query(
    `UPDATE jobs AS j SET ${fields.map((f) => `${COLUMNS[f]} = u.${COLUMNS[f]}`).join(", ")}
       FROM ${valuesTable(db, values, "u", ["id", ...fields.map((f) => COLUMNS[f])])}
      WHERE j.id = u.id`,
    params,
  );
}

/**
 * Move a job along the state table (job-states.ts) from the status `job` has, writing `changes`
 * with it, only if the row still has that status. False when it no longer did (another step moved
 * it first): nothing was written, and the caller decides what the lost race means. On success
 * `job` takes the new status and the changes.
 */
export async function moveJob(db: Db, job: JobRecord, trigger: JobTrigger, changes: JobChanges = {}): Promise<boolean> {
  const statement = new CombinedStatement(db);
  const to = addMoves(statement, [{ job, changes }], trigger)[0]!;
  if ((await statement.run(db)).length === 0) return false;
  Object.assign(job, changes, { status: to });
  return true;
}

/** `moveJob` for a step that cannot lose the race unless something is wrong: throws JobMovedError. */
export async function mustMoveJob(db: Db, job: JobRecord, trigger: JobTrigger, changes: JobChanges = {}): Promise<void> {
  const expected = job.status;
  if (!(await moveJob(db, job, trigger, changes))) throw new JobMovedError(job.id, expected, trigger);
}

/**
 * The slot each job's escrow confirmed in, as a step of `statement` (the chain journal's, marking
 * the escrows confirmed): `confirmed` names its step giving each escrow just marked, with the job
 * as its subject.
 */
export function addJobSlots(statement: CombinedStatement, confirmed: string): void {
  statement.step("jobs_slotted", `UPDATE jobs AS j SET slot = c.slot FROM ${confirmed} c WHERE j.id = c.subject`);
}

/**
 * `mustMoveJob` for several jobs in one statement, each with its own values of the same fields.
 * All or nothing: when any job had moved on, none is written and JobMovedError names it. On
 * success each job takes its new status and changes.
 */
export async function mustMoveJobs(db: Db, moves: readonly { job: JobRecord; changes: JobChanges }[], trigger: JobTrigger): Promise<void> {
  const statement = new CombinedStatement(db);
  const moved = addJobMoves(statement, moves, trigger);
  moved(await statement.run(db));
}

/**
 * `mustMoveJobs` as a step of `statement`, whose result it gives; the caller runs the statement in
 * its transaction and hands its rows to the function returned, which throws JobMovedError (for
 * the caller's transaction to roll back) or moves the records passed, as mustMoveJobs does.
 */
export function addJobMoves(statement: CombinedStatement, moves: readonly { job: JobRecord; changes: JobChanges }[], trigger: JobTrigger): (rows: readonly { id: string }[]) => void {
  if (moves.length === 0) return () => undefined;
  const tos = addMoves(statement, moves, trigger);
  return (moved) => {
    if (moved.length < moves.length) {
      const lost = moves.find(({ job }) => !moved.some((row) => row.id === job.id))!;
      throw new JobMovedError(lost.job.id, lost.job.status, trigger);
    }
    moves.forEach(({ job, changes }, i) => Object.assign(job, changes, { status: tos[i] }));
  };
}

/**
 * The steps of `statement` moving each job from the status its record has, guarded by it, with
 * its changes (all jobs the same fields), and between the queues as the move says; the statement
 * returns the ids of the jobs moved. Returns each job's new status.
 */
function addMoves(statement: CombinedStatement, moves: readonly { job: JobRecord; changes: JobChanges }[], trigger: JobTrigger): JobStatus[] {
  const fields = Object.keys(moves[0]!.changes) as (keyof JobChanges)[];
  if ((fields as string[]).includes("status")) throw new Error("moveJob takes the new status from the state table");
  const tos = moves.map(({ job }) => nextStatus(job.status, trigger));
  const moving = statement.table(
    ["text", "text", "text", ...fields.map((f) => TYPES[f])],
    moves.map(({ job, changes }, i) => [job.id, job.status, tos[i], ...fields.map((f) => toColumn(f, changes[f]))]),
    "m",
    ["id", "from_status", "to_status", ...fields.map((f) => COLUMNS[f])],
  );
  statement.step(
    "jobs_moved",
    `UPDATE jobs AS j SET status = m.to_status${fields.map((f) => `, ${COLUMNS[f]} = m.${COLUMNS[f]}`).join("")}
       FROM ${moving}
      WHERE j.id = m.id AND j.status = m.from_status ${returning(statement.kind, "j", ["id", "node_id"])}`,
    ["id", "node_id"],
  );
  addQueueMoves(statement, moves.map(({ job }, i) => queueMoves(job.id, job.status, tos[i]!)));
  statement.returns("SELECT id FROM jobs_moved");
  return tos;
}

/** The steps taking the jobs `jobs_moved` gives out of and into queues as `changes` says; none for a job not moved. */
function addQueueMoves(statement: CombinedStatement, changes: readonly QueueChanges[]): void {
  const left = changes.flatMap(({ jobId, left }) => left.map((queue) => [queue, jobId]));
  const entered = changes.flatMap(({ jobId, entered }) => entered.map((queue) => [queue, jobId]));
  if (left.length > 0) {
    statement.step(
      "job_queues_left",
      `DELETE FROM job_queues WHERE (queue, job_id) IN (
         SELECT v.queue, v.job_id FROM ${statement.table(["text", "text"], left, "v", ["queue", "job_id"])} JOIN jobs_moved m ON m.id = v.job_id)`,
    );
  }
  if (entered.length > 0) {
    statement.step(
      "job_queues_entered",
      `INSERT INTO job_queues (queue, job_id, node_id)
       SELECT v.queue, v.job_id, m.node_id FROM ${statement.table(["text", "text"], entered, "v", ["queue", "job_id"])} JOIN jobs_moved m ON m.id = v.job_id
       WHERE true ON CONFLICT DO NOTHING`,
    );
  }
}

/**
 * Clears the kept request of every job that ended before `before` and is not disputed (a
 * disputed one keeps it for its arbitration, which clears it with the outcome).
 */
export async function forgetRequests(db: Db, before: Date): Promise<void> {
  const statement = new CombinedStatement(db);
  statement.step("due", `DELETE FROM job_queues WHERE queue = 'request_kept' AND queued_at < ${statement.param(before, "timestamptz")} RETURNING job_id`, ["job_id"]);
  statement.step("requests_forgotten", `UPDATE jobs SET request = NULL WHERE ${inQuery(db, "id", "SELECT job_id FROM due")} AND request IS NOT NULL`);
  await statement.run(db);
}

/**
 * `value` is among the rows of `query`. On PostgreSQL as `= ANY (ARRAY(query))`: the plan it keeps
 * for a prepared statement then looks each id up by key, where `IN (query)` may hash the table.
 */
function inQuery(db: Db, value: string, query: string): string {
  return spelled(db, { postgres: `${value} = ANY (ARRAY(${query}))`, sqlite: `${value} IN (${query})` });
}

/**
 * Ended jobs whose escrow record may be closed: ended (queued) before `before` and not disputed
 * now, oldest first; with `nodeId`, only that node's (and unowned) ones.
 */
export async function jobsWithEscrowToClose(db: Db, before: Date, limit: number, nodeId?: string): Promise<string[]> {
  const rows = await db.query<{ job_id: string }>(
    `SELECT job_id FROM job_queues
      WHERE queue = 'escrow_to_close' AND queued_at < $1 AND ($3::text IS NULL OR node_id = $3 OR node_id IS NULL)
      ORDER BY job_id LIMIT $2`,
    [before, limit, nodeId ?? null],
  );
  return rows.map((r) => r.job_id);
}

/** A dead node's jobs become `to`'s, whose sweeps (closing escrow records) then cover them. */
export async function adoptJobs(db: Db, from: string, to: string): Promise<number> {
  const statement = new CombinedStatement(db);
  const [fromNode, toNode] = [statement.param(from, "text"), statement.param(to, "text")];
  statement.step("queued", `UPDATE job_queues SET node_id = ${toNode} WHERE node_id = ${fromNode}`);
  statement.step("adopted", `UPDATE jobs SET node_id = ${toNode} WHERE node_id = ${fromNode} RETURNING id`, ["id"]);
  statement.returns("SELECT id FROM adopted");
  return (await statement.run(db)).length;
}

export async function markEscrowsClosed(db: Db, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return;
  const statement = new CombinedStatement(db);
  const list = statement.param([...ids], "text[]");
  statement.step("closed", `DELETE FROM job_queues WHERE queue = 'escrow_to_close' AND ${isAnyOf(db, "job_id", list)}`);
  statement.step("escrows_closed", `UPDATE jobs SET escrow_closed = true WHERE ${isAnyOf(db, "id", list)}`);
  await statement.run(db);
}

export async function getJob(db: Db, id: string): Promise<JobRecord | undefined> {
  const rows = await db.query(`${SELECT} WHERE id = $1`, [id]);
  return rows[0] ? fromRow(rows[0]) : undefined;
}

/** The jobs with these ids that exist, by id. */
export async function getJobs(db: Db, ids: readonly string[]): Promise<Map<string, JobRecord>> {
  const rows = await db.query(`${SELECT} WHERE ${isAnyOf(db, "id", "$1::text[]")}`, [[...ids]]);
  return new Map(rows.map((row) => [row.id as string, fromRow(row)]));
}

/** Every job in one of these statuses: a scan of the whole table, for checks; a running node reads its queues. */
export async function jobsWithStatus(db: Db, statuses: readonly JobStatus[]): Promise<JobRecord[]> {
  const rows = await db.query(`${SELECT} WHERE ${isAnyOf(db, "status", "$1::text[]")} ORDER BY id`, [[...statuses]]);
  return rows.map(fromRow);
}

/**
 * The jobs not yet ended, by status, and when the oldest of them was created: the settlement
 * backlog, read through the unfinished queue so its cost follows the backlog, not the table.
 */
export async function unfinishedJobCounts(db: Db): Promise<{ byStatus: Record<string, number>; oldestCreatedAt: Date | null }> {
  const rows = await db.query<{ status: string; n: number | bigint; oldest: Date | string }>(
    `SELECT status, CAST(count(*) AS integer) AS n, min(created_at) AS oldest FROM jobs
      WHERE ${inQuery(db, "id", "SELECT job_id FROM job_queues WHERE queue = 'unfinished'")} AND ${isAnyOf(db, "status", "$1::text[]")} GROUP BY status`,
    [[...UNFINISHED_STATUSES]],
  );
  const oldest = rows.map((r) => new Date(r.oldest).getTime());
  return { byStatus: Object.fromEntries(rows.map((r) => [r.status, Number(r.n)])), oldestCreatedAt: oldest.length > 0 ? new Date(Math.min(...oldest)) : null };
}

/** The ids of every job not yet ended, for the checks a start makes before anything runs. */
export async function unfinishedJobIds(db: Db): Promise<string[]> {
  return (await unfinishedJobs(db)).map((job) => job.id);
}

/** The jobs still running (pending, processing or settling); with `owner`, only those one node drives (and with `orUnowned`, those no named node does). */
export async function unfinishedJobs(db: Db, owner?: { nodeId: string; orUnowned: boolean }): Promise<JobRecord[]> {
  const rows = await db.query(
    `${SELECT} WHERE ${inQuery(db, "id", "SELECT job_id FROM job_queues WHERE queue = 'unfinished'")} AND ${isAnyOf(db, "status", "$3::text[]")}
        AND ($1::text IS NULL OR node_id = $1 OR ($2 AND node_id IS NULL)) ORDER BY id`,
    [owner?.nodeId ?? null, owner?.orUnowned ?? false, [...UNFINISHED_STATUSES]],
  );
  return rows.map(fromRow);
}

/** The jobs disputed now. */
export async function disputedJobs(db: Db): Promise<JobRecord[]> {
  const rows = await db.query(`${SELECT} WHERE ${inQuery(db, "id", "SELECT job_id FROM job_queues WHERE queue = 'disputed'")} AND status = 'disputed' ORDER BY id`);
  return rows.map(fromRow);
}

/** A job's move between queues: those it leaves and those it enters. */
interface QueueChanges {
  jobId: string;
  left: JobQueue[];
  entered: JobQueue[];
}

/**
 * The queues of jobs that stand in for indexes on the jobs table's changing columns (migration
 * jobs/005_job_queues). A job is in `unfinished` while pending, processing or settling, and in
 * `disputed` while disputed. It is in `escrow_to_close` from its end until the sweep closes its
 * escrow record, and in `request_kept` from its end until the sweep forgets its request, except
 * while disputed: arbitration needs both, and its outcome ends the job again.
 */
type JobQueue = "unfinished" | "disputed" | "escrow_to_close" | "request_kept";
const ENDED_QUEUES: readonly JobQueue[] = ["escrow_to_close", "request_kept"];

/** The queues a job moving from `from` to `to` leaves and enters. */
function queueMoves(jobId: string, from: JobStatus, to: JobStatus): QueueChanges {
  const changes: QueueChanges = { jobId, left: [], entered: [] };
  const unfinished = (status: JobStatus) => UNFINISHED_STATUSES.includes(status);
  if (unfinished(from) && isFinal(to)) {
    changes.left.push("unfinished");
    changes.entered.push(...ENDED_QUEUES);
  } else if (to === "disputed" && from !== "disputed") {
    changes.left.push(...ENDED_QUEUES);
    changes.entered.push("disputed");
  } else if (from === "disputed" && isFinal(to)) {
    changes.left.push("disputed");
    // Arbitration clears the request with its outcome: only the escrow record is left to close.
    changes.entered.push("escrow_to_close");
  }
  return changes;
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

/** One UTC day's spend of a wallet on one model. */
export interface DailySpend {
  /** The UTC day, `YYYY-MM-DD`. */
  day: string;
  model: string;
  credits: number;
  /** The charged jobs that make up `credits`. */
  jobs: number;
}

/**
 * What a wallet spent per UTC day and model over the last `days` days, today included, by the
 * day each job was made: the charges of settled (and disputed) jobs, less what an arbitration
 * paid back. Days with nothing spent have no row. Oldest day first.
 */
export async function spendByDay(db: Db, wallet: string, days: number, now = new Date()): Promise<DailySpend[]> {
  const since = new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() - (days - 1)));
  const rows = await db.query<{ day: string; model: string; credits: number; jobs: number }>(
    `SELECT ${spelled(db, { postgres: "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD')", sqlite: "substr(created_at, 1, 10)" })} AS day, model,
            CAST(sum(credits_charged - coalesce(dispute_returned_credits, 0)) AS integer) AS credits, CAST(count(*) AS integer) AS jobs
       FROM jobs
      WHERE wallet = $1 AND created_at >= $2 AND status IN ('settled', 'disputed')
      GROUP BY 1, 2
      ORDER BY 1, 2`,
    [wallet, since],
  );
  return rows.map((r) => ({ day: r.day, model: r.model, credits: Number(r.credits), jobs: Number(r.jobs) }));
}
