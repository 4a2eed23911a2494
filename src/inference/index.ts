/**
 * The inference part's public surface: the engine interface, the llama.cpp and OpenAI-compatible
 * engines, what a text's length proves about its tokens, tokenizers, model downloads and the
 * wiring model.
 */
export type { ChatMessage, Engine, FinishReason, GenerationEvent, GenerationRequest, StopReason, Usage } from "./engine.ts";
export { ContextLengthExceededError } from "./context-length-error.ts";
export { DEFAULT_CONTEXT_SIZE_CAP, DEFAULT_MAX_SEQUENCES, LlamaEngine, sharedLlama } from "./llama-engine.ts";
export type { LlamaEngineOptions } from "./llama-engine.ts";
export { DEFAULT_UPSTREAM_TIMEOUT_MS, OpenAiEngine } from "./openai-engine.ts";
export type { OpenAiEngineOptions } from "./openai-engine.ts";
export { DEFAULT_DOWNLOAD_STALL_S, huggingFaceFileUrl, isHuggingFaceSpec, ModelSourceError, resolveModelSource } from "./model-source.ts";
export type { ModelSourceOptions } from "./model-source.ts";
export { completionTokensAtMost, DEFAULT_MAX_TOKEN_BYTES, longestTokenBytes, promptTokensAtLeast, promptTokensAtMost, SILENT_TOKENS, utf8Bytes } from "./token-bounds.ts";
export { ModelVocabularies, Vocabulary } from "./vocabulary.ts";
export { FamilyTokenizers } from "./family-tokenizers.ts";
export type { TokenCounter, TokenizerFamily } from "./family-tokenizers.ts";
export {
  buildWiringModel,
  ensureWiringModel,
  expectedPenalizedReply,
  KNOWN_REPLY,
  KNOWN_REPLY_PIECES,
  knownReplyPrefix,
  LOOP_MARGIN,
  LOOP_UNIT,
  loopText,
  PENALTY_ENDING,
  prng,
  TRIGGER_WORD,
  WIRING_MODEL_FILE_NAME,
} from "./wiring-model.ts";
