/** GET /jobs and GET /jobs/{id}: the caller's own jobs, newest first. */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { ApiError } from "../../core/index.ts";
import { JOB_STATUSES, type JobListQuery, type JobRecord, jobToApi, nextCursor, parseJobListQuery } from "../../jobs/index.ts";
import { ERROR_RESPONSES, idParams, ref } from "../schemas.ts";

export interface JobRoutesOptions {
  listJobs(wallet: string, query: JobListQuery): Promise<{ jobs: JobRecord[]; hasMore: boolean }>;
  getJob(wallet: string, id: string): Promise<JobRecord | undefined>;
  /** Whether `model` names a catalog model (the `model` filter). */
  isModel(id: string): boolean;
  /** Whose jobs these are: the API key's wallet on /v1; the web app passes its session's. */
  walletOf?: (request: FastifyRequest) => string;
}

const jobId = { type: "string", pattern: "^job_", description: "a job id such as job_01J..." };
const listQuery = {
  type: "object",
  properties: {
    limit: { type: "string", pattern: "^[0-9]+$", description: "an integer from 1 to 100 (default 20)" },
    before: jobId,
    after: jobId,
    status: { type: "string", enum: [...JOB_STATUSES] },
    model: { type: "string" },
  },
};

export async function jobRoutes(app: FastifyInstance, options: JobRoutesOptions): Promise<void> {
  const walletOf = options.walletOf ?? ((request: FastifyRequest) => request.owner.wallet);
  app.get("/jobs", { schema: { querystring: listQuery, response: { 200: ref("JobList"), ...ERROR_RESPONSES } } }, async (request) => {
    const query = parseJobListQuery(request.query as Record<string, unknown>, options.isModel);
    const { jobs, hasMore } = await options.listJobs(walletOf(request), query);
    return {
      object: "list",
      data: jobs.map(jobToApi),
      has_more: hasMore,
      next_cursor: nextCursor(query, jobs.map((j) => j.id), hasMore),
    };
  });

  app.get("/jobs/:id", { schema: { params: idParams(), response: { 200: ref("Job"), ...ERROR_RESPONSES } } }, async (request) => {
    const { id } = request.params as { id: string };
    // Someone else's job answers exactly like a job that does not exist.
    const job = await options.getJob(walletOf(request), id);
    if (!job) throw new ApiError("not_found", `No job '${id}' exists.`, "job_id");
    return jobToApi(job);
  });
}
