/** The jobs part's public surface: what other parts import from it. */
export { nextCursor, parseJobListQuery } from "./job-list-query.ts";
export type { JobListQuery } from "./job-list-query.ts";
export { JOB_STATUSES, jobEnding, jobToApi } from "./job-record.ts";
export type { JobRecord } from "./job-record.ts";
export { listJobs, spendByDay, unfinishedJobCounts, unfinishedJobIds } from "./job-repo.ts";
export type { DailySpend } from "./job-repo.ts";
export { UNFINISHED_STATUSES } from "./job-states.ts";
export { DEFAULT_FIRST_TOKEN_TIMEOUT_MS, JobService } from "./job-service.ts";
export { Probation } from "./probation.ts";
export type { JobCaller, JobEvent, StartedJob, WorkerRunTimes } from "./job-service.ts";
export * as money from "./money.ts";
export { availableCredits } from "./money.ts";
export { JOBS_MIGRATIONS } from "./schema.ts";
export type { ChatRequest } from "./chat-request.ts";
export { ARBITRATION_WINDOW_HOURS, Disputes } from "./disputes.ts";
export { Arbitration, DEFAULT_AUDIT_SHARE, DEFAULT_PROVEN_AUDIT_SHARE, DEFAULT_SLASH_SHARE_BPS } from "./arbitration.ts";
export type { DisputeAnswer } from "./disputes.ts";
