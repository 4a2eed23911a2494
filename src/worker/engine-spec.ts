/**
 * `svc worker --model <catalog-id>=<engine>`: which catalog model a worker serves and what runs
 * it. The engine is a GGUF file, an `hf:<user>/<repo>/<file>.gguf` model, the URL of an
 * OpenAI-compatible server (`http://host:port/v1`, with `#<name>` when the server calls the model
 * something other than its catalog id, as Ollama does), or `builtin`, the wiring model the project
 * builds itself.
 */
import { WIRING_MODEL_ID } from "../catalog/index.ts";
import { ensureWiringModel, LlamaEngine, OpenAiEngine, resolveModelSource, type Engine } from "../inference/index.ts";

export type EngineSpec =
  | { kind: "builtin" }
  /** A local `.gguf` path or an `hf:` spec. */
  | { kind: "gguf"; source: string }
  /** An OpenAI-compatible server's API root and its own name for the model. */
  | { kind: "upstream"; url: string; upstreamModel: string };

export interface ModelSpec {
  modelId: string;
  engine: EngineSpec;
}

export class ModelSpecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ModelSpecError";
  }
}

export function parseModelSpec(arg: string): ModelSpec {
  // Catalog ids never hold '=', engines may (a URL's query), so the first one separates them.
  const split = arg.indexOf("=");
  if (split <= 0 || split === arg.length - 1) {
    throw new ModelSpecError(`--model takes <catalog-id>=<engine>, such as ${WIRING_MODEL_ID}=builtin; got '${arg}'`);
  }
  const modelId = arg.slice(0, split);
  const engine = arg.slice(split + 1);
  if (/\s/.test(modelId)) throw new ModelSpecError(`a catalog id has no spaces: '${modelId}'`);
  if (engine === "builtin") {
    // The wiring model is not a language model; serving it under a real model's name would cheat callers.
    if (modelId !== WIRING_MODEL_ID) throw new ModelSpecError(`builtin is the wiring model and serves only ${WIRING_MODEL_ID}, not ${modelId}`);
    return { modelId, engine: { kind: "builtin" } };
  }
  if (/^https?:\/\//i.test(engine)) {
    let url: URL;
    try {
      url = new URL(engine);
    } catch {
      throw new ModelSpecError(`not a valid URL: '${engine}'`);
    }
    const upstreamModel = url.hash.length > 1 ? decodeURIComponent(url.hash.slice(1)) : modelId;
    url.hash = "";
    return { modelId, engine: { kind: "upstream", url: url.href, upstreamModel } };
  }
  if (engine.startsWith("hf:") || engine.toLowerCase().endsWith(".gguf")) return { modelId, engine: { kind: "gguf", source: engine } };
  throw new ModelSpecError(`an engine is a .gguf file, hf:<user>/<repo>/<file>.gguf, an http(s) URL or builtin; got '${engine}'`);
}

export interface EngineLoadOptions {
  /** Where `hf:` downloads and the built-in model's file are kept. */
  modelsDir: string;
  /** Requests a llama.cpp engine runs at once. */
  maxSequences: number;
  /** CPU threads for a GGUF model (llama.cpp's default choice when absent). */
  threads?: number;
  /** Bearer key for OpenAI-compatible servers that want one. */
  upstreamApiKey?: string;
  /** Context window of an OpenAI-compatible server's model, for servers that do not report it (else it can only lower it). */
  upstreamContextWindow?: number;
  onDownloadProgress?: (downloadedBytes: number, totalBytes: number) => void;
}

export async function loadEngine(spec: EngineSpec, options: EngineLoadOptions): Promise<Engine> {
  switch (spec.kind) {
    case "builtin":
      // One thread: the tiny model gains nothing from more, and several workers may share a machine.
      return LlamaEngine.load({ modelPath: await ensureWiringModel(options.modelsDir), threads: 1, maxSequences: options.maxSequences });
    case "gguf": {
      const path = await resolveModelSource(spec.source, options.modelsDir, options.onDownloadProgress);
      return LlamaEngine.load({ modelPath: path, maxSequences: options.maxSequences, ...(options.threads !== undefined ? { threads: options.threads } : {}) });
    }
    case "upstream":
      return OpenAiEngine.connect({
        baseUrl: spec.url,
        model: spec.upstreamModel,
        ...(options.upstreamApiKey ? { apiKey: options.upstreamApiKey } : {}),
        ...(options.upstreamContextWindow !== undefined ? { contextWindow: options.upstreamContextWindow } : {}),
      });
  }
}

/** How a worker describes what runs a model. */
export function describeEngine(spec: EngineSpec): string {
  switch (spec.kind) {
    case "builtin":
      return "the built-in wiring model (for development; not a language model)";
    case "gguf":
      return spec.source;
    case "upstream":
      return `the OpenAI-compatible server at ${spec.url} (model ${spec.upstreamModel})`;
  }
}
