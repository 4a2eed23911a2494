/**
 * The floor and ceiling of a Llama 3 or Qwen count known without the tokenizer, checked against
 * the families' real tokenizers on texts of every kind of character their patterns tell apart,
 * and on random mixes of them.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { FamilyTokenizers } from "../../src/inference/family-tokenizers.ts";
import { tokenRange } from "../../src/inference/token-pieces.ts";

const tokenizers = new FamilyTokenizers();
after(() => tokenizers.close());

const EDGES = [
  "Hello there.",
  "I'M SURE YOU'LL SEE IT'S THEY'RE WE'VE HE'D",
  "don't  stop'\n\n  believing ''s",
  "1234567 89 0.5 -12,345 ٣٤٥ ½",
  "line\r\n\r\nnext\n \n\t\ttabbed   \n",
  "e\u0301",
  "e\u0301te\u0301 cafe\u0301 \u1100\u1161\u11a8 \u0958 \u2126 Å",
  "👩‍👩‍👧 🍌🍌 ✔︎ 中文分词测试 日本語のテキスト 한국어",
  "mixed日本English123数字",
  "\ud800 lone surrogate",
  "   leading and trailing   ",
  "",
];
const ALPHABET = [..."aZé ßΩж中ー가\u0301\u1161 \n\r\t.,!?'\"-_/()[]{}#$%&*+=:;@^`|~09٣½🍌👍\u200d", "'s", "'LL", "  ", "\r\n"];

/** A deterministic generator, so a failure names a text that reproduces it. */
function randomTexts(count: number, seed: number): string[] {
  let state = seed;
  const next = () => ((state = (state * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
  return Array.from({ length: count }, () => Array.from({ length: 1 + Math.floor(next() * 60) }, () => ALPHABET[Math.floor(next() * ALPHABET.length)]).join(""));
}

for (const family of ["llama3", "qwen"] as const) {
  test(`${family}: the tokenizer's count lies within the range, on edge cases and 1,500 random texts`, async () => {
    for (const text of [...EDGES, ...randomTexts(1_500, family === "qwen" ? 7 : 11)]) {
      const range = tokenRange(family, text);
      assert.ok(range, JSON.stringify(text));
      const tokens = await tokenizers.count(family, text);
      assert.ok(range.atLeast <= tokens && tokens <= range.atMost, `${JSON.stringify(text)}: ${tokens} tokens, range ${range.atLeast}-${range.atMost}`);
    }
  });
}

test("the floor is the count for plain words and reads fewer where a word takes more than one token", async () => {
  assert.deepEqual(tokenRange("qwen", "The capital of France is Paris."), { atLeast: 7, atMost: 31 });
  assert.equal(await tokenizers.count("qwen", "The capital of France is Paris."), 7);
  const rare = "Derinkuyu is an underground city.";
  assert.ok(tokenRange("qwen", rare)!.atLeast < (await tokenizers.count("qwen", rare)));
});

test("no range where the floor would not hold or a pass costs too much", () => {
  // A special token's spelling is one token under several pieces.
  assert.equal(tokenRange("qwen", "<think>\n\n</think>Hello"), undefined);
  assert.equal(tokenRange("llama3", "Hi<|eot_id|>"), undefined);
  // SentencePiece families have no fixed pre-tokenizer.
  assert.equal(tokenRange("mistral", "Hello there."), undefined);
  assert.equal(tokenRange("gemma3", "Hello there."), undefined);
  assert.equal(tokenRange("qwen", "word ".repeat(300)), undefined);
});
