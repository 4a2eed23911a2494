/** The jobs part's public surface: what other parts import from it. */
export { Deposits } from "./deposits.ts";
export { nextCursor, parseJobListQuery } from "./job-list-query.ts";
export type { JobListQuery } from "./job-list-query.ts";
export { JOB_STATUSES, jobToApi } from "./job-record.ts";
export type { JobRecord } from "./job-record.ts";
export { listJobs } from "./job-repo.ts";
export { JobService } from "./job-service.ts";
export type { JobEvent, StartedJob } from "./job-service.ts";
export * as money from "./money.ts";
export { availableCredits } from "./money.ts";
export { JOBS_MIGRATIONS } from "./schema.ts";
export type { ChatRequest } from "./chat-request.ts";
