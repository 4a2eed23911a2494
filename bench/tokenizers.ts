/**
 * What the gateway's own token count costs, per catalog family: the first count (loading the
 * family's tokenizer in the token-count thread) and the process memory it adds, then the time of
 * one count of 4,140 bytes of English, averaged over 100 counts.
 *
 *   npm run bench:tokenizers
 */
import { FamilyTokenizers, type TokenizerFamily } from "../src/inference/family-tokenizers.ts";

const FAMILIES: readonly TokenizerFamily[] = ["llama3", "qwen", "mistral", "gemma3"];
const TEXT = "The quick brown fox jumps over the lazy dog. ".repeat(92);
const COUNTS = 100;

const tokenizers = new FamilyTokenizers();
const rows: string[] = [];
let rssBefore = process.memoryUsage().rss;
for (const family of FAMILIES) {
  const loadStart = performance.now();
  await tokenizers.count(family, "warm");
  const loadMs = performance.now() - loadStart;
  const rss = process.memoryUsage().rss;
  const countStart = performance.now();
  for (let i = 0; i < COUNTS; i++) await tokenizers.count(family, TEXT);
  const countMs = (performance.now() - countStart) / COUNTS;
  rows.push(`| ${family} | ${loadMs.toFixed(0)} | ${((rss - rssBefore) / 1e6).toFixed(0)} | ${countMs.toFixed(2)} |`);
  rssBefore = process.memoryUsage().rss;
}
await tokenizers.close();
console.log("| family | first count (load), ms | memory added, MB | 4,140-byte count, ms |");
console.log("|---|---|---|---|");
for (const row of rows) console.log(row);
