/**
 * OpenAI sampling parameters mapped onto node-llama-cpp's generation options. node-llama-cpp's own
 * defaults differ from OpenAI's (temperature 0, top-k 40, top-p 0.95, a seed from the current
 * second), so every option is set explicitly here.
 */
import { randomInt } from "node:crypto";
import type { GenerationRequest } from "./engine.ts";

export interface LlamaSampling {
  temperature: number;
  topK: number;
  topP: number;
  seed: number;
  repeatPenalty:
    | false
    | {
        penalty: number;
        presencePenalty: number;
        frequencyPenalty: number;
        lastTokens: number;
        penalizeNewLine: boolean;
      };
}

const UINT32 = 2 ** 32;

/** llama.cpp seeds are uint32; OpenAI's are any integer, so fold them (keeping -1 apart from 1). */
export function toUint32Seed(seed: number): number {
  const n = Math.trunc(seed);
  return ((n % UINT32) + UINT32) % UINT32;
}

/**
 * Penalties: llama.cpp's penalties sampler subtracts `count * frequency + (count > 0) * presence`
 * from a token's logit, which is OpenAI's definition, so both values pass through unchanged and the
 * multiplicative repeat penalty stays off (1). Limits against OpenAI: only tokens already released
 * into the response are counted (not the prompt, not tokens held back while a stop sequence might
 * be forming), and only the last `lastTokens` of them, which is set to the whole completion budget.
 * Newlines are penalised like any token, as OpenAI does (node-llama-cpp skips them by default).
 */
export function toLlamaSampling(request: GenerationRequest): LlamaSampling {
  const penalised = request.presencePenalty !== 0 || request.frequencyPenalty !== 0;
  return {
    temperature: request.temperature,
    topK: 0, // disabled: the whole vocabulary, as OpenAI samples
    topP: request.topP,
    seed: request.seed === undefined ? randomInt(0, UINT32) : toUint32Seed(request.seed),
    repeatPenalty: penalised
      ? {
          penalty: 1,
          presencePenalty: request.presencePenalty,
          frequencyPenalty: request.frequencyPenalty,
          lastTokens: Math.max(1, request.maxTokens),
          penalizeNewLine: true,
        }
      : false,
  };
}
