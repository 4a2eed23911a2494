/** GET /jobs and GET /jobs/{id}: the caller's own jobs, newest first. */
import type { FastifyInstance } from "fastify";
import { ApiError } from "../../core/errors.ts";
import { parseJobListQuery } from "../../jobs/job-list-query.ts";
import { jobToApi } from "../../jobs/job-record.ts";
import { listJobs } from "../../jobs/job-repo.ts";
import type { HttpContext } from "../context.ts";

export function registerJobs(app: FastifyInstance, ctx: HttpContext): void {
  app.get("/jobs", async (request) => {
    const query = parseJobListQuery(request.query as Record<string, unknown>, (id) => ctx.catalog.get(id) !== undefined);
    const { jobs, hasMore } = await listJobs(ctx.db, request.owner.wallet, query);
    return {
      object: "list",
      data: jobs.map(jobToApi),
      has_more: hasMore,
      next_cursor: hasMore ? jobs[jobs.length - 1]!.id : null,
    };
  });

  app.get("/jobs/:id", async (request) => {
    const { id } = request.params as { id: string };
    // Someone else's job answers exactly like a job that does not exist.
    const job = await ctx.jobs.getJob(request.owner.wallet, id);
    if (!job) throw new ApiError("not_found", `No job '${id}' exists.`, "job_id");
    return jobToApi(job);
  });
}
