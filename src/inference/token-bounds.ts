/**
 * What a text's length alone proves about its token count, for any tokenizer. Both bounds are
 * cheap (one pass over the bytes), so they run before anything expensive: a prompt that cannot
 * fit is refused without rendering or tokenizing it, and a worker's completion count is checked
 * against what its output can hold.
 */
import type { LlamaModel, Token } from "node-llama-cpp";
import type { ChatMessage, StopReason } from "./engine.ts";

/**
 * The longest token assumed for a vocabulary the gateway has not read. Real vocabularies stay far
 * below it (the wiring model's longest token is 12 bytes); assuming too much only weakens the bound.
 */
export const DEFAULT_MAX_TOKEN_BYTES = 256;

/**
 * Tokens a model may sample that add no bytes to the output: a control token rendered as nothing,
 * or the last bytes of a character cut off by the token limit that the detokenizer never releases
 * (at most three). The end-of-generation token is not counted by engines at all.
 */
export const SILENT_TOKENS = 4;

export function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, "utf8");
}

/**
 * Fewest tokens the conversation can take: the rendered prompt contains every message's text,
 * and no token covers more than `maxTokenBytes` of it.
 */
export function promptTokensAtLeast(messages: readonly ChatMessage[], maxTokenBytes: number): number {
  let bytes = 0;
  for (const m of messages) bytes += utf8Bytes(m.content);
  return Math.ceil(bytes / maxTokenBytes);
}

/**
 * Most tokens a tokenizer may make of one byte of a message's text. A byte-level BPE vocabulary
 * (Llama 3, Qwen) and a SentencePiece one with byte fallback (Mistral, Gemma) make at most one
 * token of each byte they see; what they see can be longer than what was sent when they normalize
 * it first, and NFC (Qwen's tokenizer applies it; the others no Unicode normalization) at most
 * triples a text's UTF-8 bytes (Unicode's UAX #15). One more for good measure.
 */
const TOKENS_PER_BYTE_AT_MOST = 4;

/**
 * Tokens a chat template may add around each message (its role's markers and separators), and
 * to a whole prompt (a default system prompt, the assistant's opening): generous for the
 * templates of the catalog's families, which add a handful per message and a few dozen at most.
 */
const TEMPLATE_TOKENS_PER_MESSAGE = 32;
const TEMPLATE_TOKENS_PER_PROMPT = 256;

/**
 * Most tokens the conversation can take, rendered through a model's chat template. Far above the
 * true count, but known without a tokenizer: a prompt this bound proves fits in a context window
 * needs no count to be admitted (jobs/prompt-fit.ts).
 */
export function promptTokensAtMost(messages: readonly ChatMessage[]): number {
  let tokens = TEMPLATE_TOKENS_PER_PROMPT;
  for (const m of messages) tokens += TEMPLATE_TOKENS_PER_MESSAGE + TOKENS_PER_BYTE_AT_MOST * (utf8Bytes(m.role) + utf8Bytes(m.content));
  return tokens;
}

/**
 * Most completion tokens an output can hold: every sampled token yields at least one byte, except
 * the few silent ones. A stop sequence is sampled but withheld from the output, so when one may
 * have ended the job its bytes count too.
 */
export function completionTokensAtMost(input: { text: string; stop: readonly string[]; finishReason: StopReason }): number {
  const withheld = input.finishReason === "stop" ? Math.max(0, ...input.stop.map(utf8Bytes)) : 0;
  return utf8Bytes(input.text) + withheld + SILENT_TOKENS;
}

/** Bytes of the longest token the model can produce, special tokens rendered as their text. */
export function longestTokenBytes(model: LlamaModel): number {
  const size = vocabularySize(model);
  let longest = 1;
  for (let id = 0; id < size; id++) {
    const bytes = Buffer.byteLength(model.detokenize([id as Token], true), "utf8");
    if (bytes > longest) longest = bytes;
  }
  return longest;
}

function vocabularySize(model: LlamaModel): number {
  const tokens: unknown = model.fileInfo.metadata.tokenizer?.ggml?.tokens;
  if (!Array.isArray(tokens)) throw new Error("the GGUF file lists no tokenizer tokens");
  return tokens.length;
}
