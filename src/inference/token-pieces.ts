/**
 * What a byte-level BPE family's tokenizer will count for a text, bounded without its vocabulary.
 * Llama 3's and Qwen's tokenizers first cut the text with a fixed pattern (the pre-tokenizer), and
 * BPE never merges across the cuts: every piece becomes at least one token, and every token is at
 * least one byte. So the pieces are a floor and the bytes a ceiling of the tokenizer's count,
 * known in one pass of a regular expression, microseconds on the main thread, where the count
 * itself is a trip to the token-count thread. The families' patterns are those of their
 * tokenizer.json files, with the case-insensitive group spelled out (JavaScript's patterns take
 * no inline flags).
 */
import { utf8Bytes } from "./token-bounds.ts";

const CONTRACTION = "'(?:[sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD])";
const REST = "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|NUMBER| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/** The pre-tokenizer of each tokenizer family that has one, and whether its tokenizer applies NFC first. */
const PRE_TOKENIZERS = new Map<string, { pattern: RegExp; nfc: boolean }>([
  // Llama 3 keeps up to three digits together; Qwen cuts every digit apart.
  ["llama3", { pattern: new RegExp(`${CONTRACTION}|${REST.replace("NUMBER", "\\p{N}{1,3}")}`, "gu"), nfc: false }],
  ["qwen", { pattern: new RegExp(`${CONTRACTION}|${REST.replace("NUMBER", "\\p{N}")}`, "gu"), nfc: true }],
]);

/**
 * Every special token of these families is spelled from "<" ("<|im_end|>", "<think>"), and the
 * tokenizer reads such a spelling in a text as one token, under the pieces the pattern cuts it
 * into: a text holding one has no floor here.
 */
const SPECIAL_TOKEN_START = "<";

/**
 * Longer texts are left to the count: their pass would cost the main thread tens of microseconds,
 * and a long output seldom stays within its floor (every word the vocabulary lacks whole takes
 * two tokens or more).
 */
const MAX_TEXT_CHARS = 1_024;

export interface TokenRange {
  atLeast: number;
  atMost: number;
}

/** The tokens `family`'s tokenizer counts for `text` lie in this range; undefined where that is not known without counting. */
export function tokenRange(family: string, text: string): TokenRange | undefined {
  const preTokenizer = PRE_TOKENIZERS.get(family);
  if (preTokenizer === undefined || text.length > MAX_TEXT_CHARS || text.includes(SPECIAL_TOKEN_START)) return undefined;
  const seen = preTokenizer.nfc ? text.normalize("NFC") : text;
  let pieces = 0;
  preTokenizer.pattern.lastIndex = 0;
  while (preTokenizer.pattern.exec(seen) !== null) pieces++;
  return { atLeast: pieces, atMost: utf8Bytes(seen) };
}
