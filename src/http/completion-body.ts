/** The chat-completions response objects and SSE chunks, shaped as the OpenAI protocol. Pure. */
import type { FinishReason, Usage } from "../inference/index.ts";

export function completionId(jobId: string): string {
  return `chatcmpl-${jobId}`;
}

function usageBody(usage: Usage) {
  return {
    prompt_tokens: usage.promptTokens,
    completion_tokens: usage.completionTokens,
    total_tokens: usage.promptTokens + usage.completionTokens,
  };
}

export function completionBody(input: { jobId: string; created: number; model: string; content: string; finishReason: FinishReason; usage: Usage }) {
  return {
    id: completionId(input.jobId),
    object: "chat.completion",
    created: input.created,
    model: input.model,
    choices: [{ index: 0, message: { role: "assistant", content: input.content }, logprobs: null, finish_reason: input.finishReason }],
    usage: usageBody(input.usage),
  };
}

export interface ChunkContext {
  jobId: string;
  created: number;
  model: string;
  /** With stream_options.include_usage, every chunk carries `usage: null` until the usage chunk. */
  includeUsage: boolean;
}

function chunk(ctx: ChunkContext, choices: unknown[], usage?: Usage) {
  const body: Record<string, unknown> = {
    id: completionId(ctx.jobId),
    object: "chat.completion.chunk",
    created: ctx.created,
    model: ctx.model,
    choices,
  };
  if (ctx.includeUsage) body.usage = usage ? usageBody(usage) : null;
  return body;
}

export function deltaChunk(ctx: ChunkContext, content: string, first: boolean) {
  const delta = first ? { role: "assistant", content } : { content };
  return chunk(ctx, [{ index: 0, delta, logprobs: null, finish_reason: null }]);
}

export function finishChunk(ctx: ChunkContext, finishReason: FinishReason) {
  return chunk(ctx, [{ index: 0, delta: {}, logprobs: null, finish_reason: finishReason }]);
}

export function usageChunk(ctx: ChunkContext, usage: Usage) {
  return chunk(ctx, [], usage);
}

export function sseData(value: unknown): string {
  return `data: ${typeof value === "string" ? value : JSON.stringify(value)}\n\n`;
}
