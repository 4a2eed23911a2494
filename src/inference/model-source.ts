/**
 * Where a model file comes from: a local `.gguf` path, or `hf:owner/repo/file.gguf`, which
 * node-llama-cpp downloads once into `dir` and reuses from there afterwards (it honours
 * HF_ENDPOINT and HF_TOKEN).
 */
import { stat } from "node:fs/promises";
import { resolveModelFile } from "node-llama-cpp";

export class ModelSourceError extends Error {
  constructor(
    readonly spec: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = "ModelSourceError";
  }
}

const HF_FILE_SPEC = /^hf:[^/\s]+\/[^/\s]+\/\S+\.gguf$/;

export function isHuggingFaceSpec(spec: string): boolean {
  return spec.startsWith("hf:");
}

/** Resolves `spec` to a local model path, downloading `hf:` files into `dir` when not cached yet. */
export async function resolveModelSource(
  spec: string,
  dir: string,
  onProgress?: (downloaded: number, total: number) => void,
): Promise<string> {
  if (isHuggingFaceSpec(spec)) {
    if (!HF_FILE_SPEC.test(spec)) {
      throw new ModelSourceError(spec, `expected hf:owner/repo/path/to/file.gguf, got ${spec}`);
    }
    try {
      return await resolveModelFile(spec, {
        directory: dir,
        cli: false,
        onProgress: onProgress && (({ downloadedSize, totalSize }) => onProgress(downloadedSize, totalSize)),
      });
    } catch (err) {
      throw new ModelSourceError(spec, `could not fetch ${spec}: ${(err as Error).message}`, { cause: err });
    }
  }
  if (!spec.toLowerCase().endsWith(".gguf")) {
    throw new ModelSourceError(spec, `a model is a .gguf file or an hf: spec, got ${spec}`);
  }
  const info = await stat(spec).catch(() => null);
  if (info === null) throw new ModelSourceError(spec, `model file not found: ${spec}`);
  if (!info.isFile()) throw new ModelSourceError(spec, `model path is not a file: ${spec}`);
  return spec;
}
