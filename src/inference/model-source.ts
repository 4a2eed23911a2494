/**
 * Where a model file comes from: a local `.gguf` path, or `hf:owner/repo/file.gguf`, which
 * node-llama-cpp downloads once into `dir` and reuses from there afterwards (it honours HF_TOKEN;
 * HF_ENDPOINT picks a mirror).
 *
 * node-llama-cpp retries an unreachable host without end and without a word, so a download is
 * first tried with a plain request of our own, bounded in time, and then watched: no new bytes
 * for the stall timeout ends it. Every failure is a ModelSourceError whose message is one line
 * saying what was tried and what to do instead.
 */
import { stat } from "node:fs/promises";
import { awaitedLater } from "../core/index.ts";
import { nodeLlamaCpp } from "./node-llama.ts";

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

const HF_FILE_SPEC = /^hf:([^/\s]+)\/([^/\s]+)\/(\S+\.gguf)$/;
const DEFAULT_HF_ENDPOINT = "https://huggingface.co";
/** How long a download may go without a new byte (also the bound on reaching the host at all). */
export const DEFAULT_DOWNLOAD_STALL_S = 20;

const NEXT_STEP =
  "download the file some other way and pass its local .gguf path, or set HF_ENDPOINT to a Hugging Face mirror you can reach";

export function isHuggingFaceSpec(spec: string): boolean {
  return spec.startsWith("hf:");
}

export interface ModelSourceOptions {
  /** No new bytes for this long fails the download; default SVC_DOWNLOAD_STALL_S or 20 s. */
  stallMs?: number;
}

/** Resolves `spec` to a local model path, downloading `hf:` files into `dir` when not cached yet. */
export async function resolveModelSource(
  spec: string,
  dir: string,
  onProgress?: (downloaded: number, total: number) => void,
  options: ModelSourceOptions = {},
): Promise<string> {
  if (isHuggingFaceSpec(spec)) return resolveHuggingFace(spec, dir, onProgress, options.stallMs ?? stallMsFromEnv());
  if (!spec.toLowerCase().endsWith(".gguf")) {
    throw new ModelSourceError(spec, `a model is a .gguf file or hf:owner/repo/file.gguf, got '${spec}'`);
  }
  const info = await stat(spec).catch(() => null);
  if (info === null) throw new ModelSourceError(spec, `model file not found: ${spec}`);
  if (!info.isFile()) throw new ModelSourceError(spec, `model path is not a file: ${spec}`);
  return spec;
}

function stallMsFromEnv(): number {
  const seconds = Number(process.env.SVC_DOWNLOAD_STALL_S);
  return (Number.isFinite(seconds) && seconds > 0 ? seconds : DEFAULT_DOWNLOAD_STALL_S) * 1000;
}

function huggingFaceEndpoint(): string {
  return process.env.HF_ENDPOINT || DEFAULT_HF_ENDPOINT;
}

/** The file's URL on a Hugging Face endpoint, as node-llama-cpp builds it. */
export function huggingFaceFileUrl(spec: string, endpoint = huggingFaceEndpoint()): string {
  const match = HF_FILE_SPEC.exec(spec);
  if (!match) throw new ModelSourceError(spec, `expected hf:owner/repo/path/to/file.gguf, got '${spec}'`);
  const [, owner, repo, file] = match as unknown as [string, string, string, string];
  const filePath = file.split("/").map(encodeURIComponent).join("/");
  return `${endpoint.replace(/\/+$/, "")}/${encodeURIComponent(owner)}/${encodeURIComponent(repo)}/resolve/main/${filePath}`;
}

async function resolveHuggingFace(
  spec: string,
  dir: string,
  onProgress: ((downloaded: number, total: number) => void) | undefined,
  stallMs: number,
): Promise<string> {
  const endpoint = huggingFaceEndpoint();
  const url = huggingFaceFileUrl(spec, endpoint);
  // A file downloaded before is used as it is, without touching the network.
  const { resolveModelFile } = await nodeLlamaCpp();
  const cached = await resolveModelFile(spec, { directory: dir, cli: false, download: false }).catch(() => null);
  if (cached !== null) return cached;
  await probe(spec, url, stallMs);
  return watchedDownload(spec, { url, endpoint }, dir, onProgress, stallMs);
}

/** One bounded request for the file's headers, so an unreachable or wrong source fails in seconds. */
async function probe(spec: string, url: string, stallMs: number): Promise<void> {
  const token = process.env.HF_TOKEN;
  let response: Response;
  try {
    response = await fetch(url, {
      method: "HEAD",
      signal: AbortSignal.timeout(stallMs),
      ...(token ? { headers: { authorization: `Bearer ${token}` } } : {}),
    });
  } catch (err) {
    throw new ModelSourceError(spec, `could not download ${spec}: ${fetchFailure(err, url, stallMs)} (tried ${url}); ${NEXT_STEP}`, { cause: err });
  }
  if (response.ok) return;
  const reason =
    response.status === 404
      ? "no such file there (check the owner, repo and file name)"
      : response.status === 401 || response.status === 403
        ? "access denied (a gated or private model needs HF_TOKEN set to a token that may read it)"
        : `the server answered HTTP ${response.status}`;
  throw new ModelSourceError(spec, `could not download ${spec}: ${reason} (tried ${url})`);
}

function fetchFailure(err: unknown, url: string, stallMs: number): string {
  const { host } = new URL(url);
  if ((err as Error).name === "TimeoutError") return `no answer from ${host} within ${stallMs / 1000} s`;
  const cause = (err as Error).cause as { code?: string; message?: string } | undefined;
  if (cause?.code === "ECONNREFUSED") return `${host} refused the connection`;
  if (cause?.code === "ENOTFOUND" || cause?.code === "EAI_AGAIN") return `cannot resolve ${host} (no network?)`;
  return `cannot reach ${host} (${cause?.code ?? cause?.message ?? (err as Error).message})`;
}

/** node-llama-cpp's download, failed when no new byte arrives for `stallMs`. */
async function watchedDownload(
  spec: string,
  source: { url: string; endpoint: string },
  dir: string,
  onProgress: ((downloaded: number, total: number) => void) | undefined,
  stallMs: number,
): Promise<string> {
  const { resolveModelFile } = await nodeLlamaCpp();
  const abort = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let rejectStalled: (error: Error) => void = () => {};
  const stalled = new Promise<never>((_, reject) => (rejectStalled = reject));
  const arm = () => {
    clearTimeout(timer);
    timer = setTimeout(() => {
      const host = new URL(source.url).host;
      const error = new ModelSourceError(spec, `could not download ${spec}: no data from ${host} for ${stallMs / 1000} s (tried ${source.url}); ${NEXT_STEP}`);
      abort.abort(error);
      rejectStalled(error);
    }, stallMs);
  };
  let downloadedMost = -1;
  arm();
  const download = resolveModelFile(spec, {
    directory: dir,
    cli: false,
    signal: abort.signal,
    endpoints: { huggingFace: source.endpoint },
    onProgress: ({ downloadedSize, totalSize }) => {
      if (downloadedSize > downloadedMost) {
        downloadedMost = downloadedSize;
        arm();
      }
      onProgress?.(downloadedSize, totalSize);
    },
  });
  // Raced below against the stall; once stalled, node-llama-cpp may still reject later, which the stall has already reported.
  awaitedLater(download);
  try {
    return await Promise.race([download, stalled]);
  } catch (err) {
    if (err instanceof ModelSourceError) throw err;
    throw new ModelSourceError(spec, `could not download ${spec}: ${oneLine((err as Error).message)} (tried ${source.url})`, { cause: err });
  } finally {
    clearTimeout(timer);
  }
}

function oneLine(text: string): string {
  return text.replace(/\s*\n\s*/g, " ").trim();
}
