/**
 * Whether a prompt needs its worker's count before it is admitted. Pure: the count itself is a
 * round trip to the worker (JobService.countOnWorkers), asked only when these rules leave it open.
 */
import { DEFAULT_COMPLETION_CAP } from "../core/index.ts";
import { promptTokensAtMost, type ChatMessage } from "../inference/index.ts";

/** What admission knows of a prompt's room in its worker's context window. */
export interface Fit {
  /** The worker's count, or 0 when none was needed: the job's prompt tokens then come with its output. */
  promptTokens: number;
  /** Tokens of context the job needs: its prompt's and its completion's. */
  wanted: number;
  contextWindow: number;
}

/**
 * The fit of a prompt that needs no count, in a worker's `contextWindow` (the catalog's or the
 * worker's, whichever is smaller): when the most tokens it can take (promptTokensAtMost) leave
 * room for its whole completion, a count would decide nothing. With max_tokens the price does not
 * depend on the prompt; without it the completion's cap is DEFAULT_COMPLETION_CAP whenever the
 * window holds that beside the prompt (core/pricing.ts, planEscrow). Undefined when only a count
 * can tell.
 */
export function fitUncounted(contextWindow: number, request: { messages: readonly ChatMessage[]; maxTokens?: number | undefined }): Fit | undefined {
  const wanted = promptTokensAtMost(request.messages) + (request.maxTokens ?? DEFAULT_COMPLETION_CAP);
  return wanted <= contextWindow ? { promptTokens: 0, wanted, contextWindow } : undefined;
}

/** The context a job needs on a worker: its prompt's count and its completion, or, uncounted, what fitUncounted proved. */
export function contextWanted(job: { promptTokens: number; maxTokens: number }, messages: readonly ChatMessage[]): number {
  return (job.promptTokens > 0 ? job.promptTokens : promptTokensAtMost(messages)) + job.maxTokens;
}
