/**
 * A model's tokenizer without its weights: node-llama-cpp loads a GGUF with `vocabOnly`, which
 * reads the vocabulary and skips the tensors. The gateway counts the completion text it relayed
 * with it, and learns the vocabulary's longest token for the cheap prompt bound (token-bounds.ts).
 */
import type { LlamaModel } from "node-llama-cpp";
import type { Logger } from "../core/index.ts";
import { sharedLlama } from "./llama-engine.ts";
import type { FamilyTokenizers, TokenCounter, TokenizerFamily } from "./family-tokenizers.ts";
import { longestTokenBytes } from "./token-bounds.ts";

export class Vocabulary {
  private constructor(
    private readonly model: LlamaModel,
    /** No token spans more bytes than this. */
    readonly maxTokenBytes: number,
  ) {}

  static async load(modelPath: string): Promise<Vocabulary> {
    const llama = await sharedLlama();
    const model = await llama.loadModel({ modelPath, vocabOnly: true });
    return new Vocabulary(model, longestTokenBytes(model));
  }

  /** Tokens of `text` as the model's tokenizer splits it (special-token text counted as text). */
  countTokens(text: string): number {
    return this.model.tokenize(text).length;
  }

  close(): Promise<void> {
    return this.model.dispose();
  }
}

/**
 * What the gateway counts each catalog model's tokens with: the vocabulary of a GGUF file its
 * source provides (the wiring model's), loaded on first use, else its family's tokenizer
 * (family-tokenizers.ts). A model with neither (or whose load failed) is bounded by bytes alone,
 * and so is a count that fails: it is never worth failing a caller's job over.
 */
export class ModelVocabularies {
  private readonly loaded = new Map<string, Promise<Vocabulary | undefined>>();

  constructor(
    private readonly sources: ReadonlyMap<string, () => Promise<string>>,
    private readonly logger?: Logger,
    private readonly families?: { tokenizers: FamilyTokenizers; of: ReadonlyMap<string, TokenizerFamily> },
  ) {}

  async get(model: string): Promise<TokenCounter | undefined> {
    const vocabulary = await this.vocabulary(model);
    if (vocabulary) return { maxTokenBytes: vocabulary.maxTokenBytes, countTokens: async (text) => vocabulary.countTokens(text) };
    const family = this.families?.of.get(model);
    return family && this.families!.tokenizers.counter(family);
  }

  private vocabulary(model: string): Promise<Vocabulary | undefined> {
    let vocabulary = this.loaded.get(model);
    if (vocabulary === undefined) {
      const source = this.sources.get(model);
      vocabulary = source
        ? source()
            .then((path) => Vocabulary.load(path))
            .catch((error: unknown) => {
              this.logger?.warn({ err: error, model }, "could not load the model's vocabulary; its token counts are bounded by bytes");
              return undefined;
            })
        : Promise.resolve(undefined);
      this.loaded.set(model, vocabulary);
    }
    return vocabulary;
  }

  async close(): Promise<void> {
    const all = await Promise.all(this.loaded.values());
    await Promise.all(all.map((v) => v?.close()));
    await this.families?.tokenizers.close();
  }
}
