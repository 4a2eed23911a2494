/**
 * A job's spans, when the service traces (src/tracing): its admission and its run on workers,
 * children of the request's span, and its settlement batch, which serves many jobs and links to
 * each one's run. Every function does nothing when the service does not trace.
 */
import { endSpan, jobLinks, rememberJob, rememberTransaction, traced, tracer, withSpan, type Span } from "../tracing/index.ts";
import type { ChatRequest } from "./chat-request.ts";
import type { JobRecord } from "./job-record.ts";

/** The job's run, from its hand-over to a worker until its last output arrived; kept as the job's trace for its settlement and chain spans. */
export function runSpan(job: JobRecord, request: ChatRequest): Span | undefined {
  const span = tracer()?.startSpan("job.run", { attributes: { "svc.job_id": job.id, "svc.model": job.model, "svc.stream": request.stream === true, "svc.max_tokens": job.maxTokens } });
  rememberJob(job.id, span);
  return span;
}

/** Ends the run's span with what its last worker produced. */
export function endRunSpan(span: Span | undefined, run: { lease: { worker: { address: string } }; done?: { finishReason: string } | undefined; workerError: unknown }, error?: unknown): void {
  if (!span) return;
  span.setAttributes({ "svc.worker": run.lease.worker.address, "svc.finish_reason": run.done?.finishReason ?? "none" });
  endSpan(span, error ?? (run.done === undefined ? run.workerError : undefined));
}

/** The job's admission (the key confirmed, the credits reserved, its escrow lock signed, all committed), ended when it commits or is refused. */
export function traceAdmission<T>(job: JobRecord, granted: boolean, admit: () => Promise<T>): Promise<T> {
  return traced("job.admission", () => ({ "svc.job_id": job.id, "svc.model": job.model, "svc.credits_locked": job.creditsLocked, "svc.granted": granted }), admit);
}

/**
 * A settlement batch: the worker's signature over its jobs' settlement, and its transaction built
 * and recorded. A trace of its own (it serves many requests), linked to each job's run; its
 * transaction's send is its child (chain.send).
 */
export async function traceSettlementBatch<T extends readonly { signature: string }[]>(jobs: readonly JobRecord[], worker: string, settle: () => Promise<T>): Promise<T> {
  const span = tracer()?.startSpan("settlement.batch", { root: true, links: jobLinks(jobs.map((job) => job.id)), attributes: { "svc.jobs": jobs.length, "svc.worker": worker } });
  if (!span) return settle();
  try {
    const actions = await withSpan(span, settle);
    if (actions[0]) rememberTransaction(actions[0].signature, span);
    endSpan(span);
    return actions;
  } catch (error) {
    endSpan(span, error);
    throw error;
  }
}
