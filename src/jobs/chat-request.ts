/**
 * A chat completion as the jobs part runs it: the caller's messages and sampling parameters, with
 * OpenAI's defaults already filled in by whoever read the request (the HTTP part parses the body).
 */
import type { ChatMessage } from "../inference/index.ts";

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
