/** GET /jobs and GET /jobs/{id}: the caller's own jobs, newest first. */
import type { FastifyInstance, FastifyRequest } from "fastify";
import { ApiError } from "../../core/errors.ts";
import { nextCursor, parseJobListQuery } from "../../jobs/job-list-query.ts";
import { jobToApi } from "../../jobs/job-record.ts";
import { listJobs } from "../../jobs/job-repo.ts";
import type { HttpContext } from "../context.ts";

/** `walletOf`: whose jobs these are (the API key's wallet on /v1; the web app passes its session's). */
export function registerJobs(app: FastifyInstance, ctx: HttpContext, walletOf = (request: FastifyRequest) => request.owner.wallet): void {
  app.get("/jobs", async (request) => {
    const query = parseJobListQuery(request.query as Record<string, unknown>, (id) => ctx.catalog.get(id) !== undefined);
    const { jobs, hasMore } = await listJobs(ctx.db, walletOf(request), query);
    return {
      object: "list",
      data: jobs.map(jobToApi),
      has_more: hasMore,
      next_cursor: nextCursor(query, jobs.map((j) => j.id), hasMore),
    };
  });

  app.get("/jobs/:id", async (request) => {
    const { id } = request.params as { id: string };
    // Someone else's job answers exactly like a job that does not exist.
    const job = await ctx.jobs.getJob(walletOf(request), id);
    if (!job) throw new ApiError("not_found", `No job '${id}' exists.`, "job_id");
    return jobToApi(job);
  });
}
