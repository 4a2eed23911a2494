/** Query parameters of GET /jobs (spec "GET /jobs", order and cursors per DECISIONS.md). Pure. */
import { ApiError, isId } from "../core/index.ts";
import { JOB_STATUSES, type JobStatus } from "./job-record.ts";

export const DEFAULT_PAGE_SIZE = 20;
export const MAX_PAGE_SIZE = 100;

export interface JobListQuery {
  limit: number;
  before?: string;
  after?: string;
  status?: JobStatus;
  model?: string;
}

function single(query: Record<string, unknown>, name: string): string | undefined {
  const value = query[name];
  if (value === undefined) return undefined;
  if (typeof value !== "string") throw new ApiError("invalid_request", `'${name}' may be given once.`, name);
  return value;
}

export function parseJobListQuery(query: Record<string, unknown>, knownModel: (id: string) => boolean): JobListQuery {
  const result: JobListQuery = { limit: DEFAULT_PAGE_SIZE };
  const limit = single(query, "limit");
  if (limit !== undefined) {
    if (!/^\d+$/.test(limit) || Number(limit) < 1 || Number(limit) > MAX_PAGE_SIZE) {
      throw new ApiError("invalid_request", `'limit' must be an integer from 1 to ${MAX_PAGE_SIZE}.`, "limit");
    }
    result.limit = Number(limit);
  }
  const before = single(query, "before");
  const after = single(query, "after");
  if (before !== undefined && after !== undefined) {
    throw new ApiError("invalid_request", "Give 'before' or 'after', not both.", "before");
  }
  for (const [name, value] of [["before", before], ["after", after]] as const) {
    if (value !== undefined && !isId("job", value)) {
      throw new ApiError("invalid_request", `'${name}' must be a job id such as job_01J...`, name);
    }
  }
  if (before !== undefined) result.before = before;
  if (after !== undefined) result.after = after;
  const status = single(query, "status");
  if (status !== undefined) {
    if (!(JOB_STATUSES as readonly string[]).includes(status)) {
      throw new ApiError("invalid_request", `'status' must be one of ${JOB_STATUSES.join(", ")}.`, "status");
    }
    result.status = status as JobStatus;
  }
  const model = single(query, "model");
  if (model !== undefined) {
    if (!knownModel(model)) throw new ApiError("invalid_request", `'model' names no model in the catalog: ${model}.`, "model");
    result.model = model;
  }
  return result;
}

/**
 * The cursor that continues a page in the direction it was asked for: paging back (`before`, the
 * default) continues from the page's oldest job, paging forward (`after`) from its newest. The
 * page is newest first either way. Null when nothing more lies in that direction.
 */
export function nextCursor(query: JobListQuery, pageIds: readonly string[], hasMore: boolean): string | null {
  if (!hasMore || pageIds.length === 0) return null;
  return query.after !== undefined ? pageIds[0]! : pageIds[pageIds.length - 1]!;
}
