/**
 * A chat completion as the jobs part runs it: the caller's messages and sampling parameters, with
 * OpenAI's defaults already filled in by whoever read the request (the HTTP part parses the body).
 */
import { createHash } from "node:crypto";
import type { ChatMessage, GenerationRequest } from "../inference/index.ts";

export interface ChatRequest {
  model: string;
  messages: ChatMessage[];
  stream: boolean;
  includeUsage: boolean;
  maxTokens: number | undefined;
  temperature: number;
  topP: number;
  stop: string[];
  frequencyPenalty: number;
  presencePenalty: number;
  seed: number | undefined;
}

/**
 * The sampling seed a job runs with: the caller's, or one drawn from the job id, so that a job's
 * re-execution (a dispute's arbitration, an audit) samples exactly as the job did.
 */
export function jobSeed(request: Pick<ChatRequest, "seed">, jobId: string): number {
  if (request.seed !== undefined) return request.seed;
  return createHash("sha256").update(jobId).digest().readUInt32LE(0);
}

/** What a worker runs for a job: the caller's request, with the job's limit and seed. */
export function generationOf(job: { id: string; maxTokens: number }, request: ChatRequest): GenerationRequest {
  return {
    messages: request.messages,
    maxTokens: job.maxTokens,
    temperature: request.temperature,
    topP: request.topP,
    stop: request.stop,
    frequencyPenalty: request.frequencyPenalty,
    presencePenalty: request.presencePenalty,
    seed: jobSeed(request, job.id),
  };
}
