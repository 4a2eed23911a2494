/**
 * What the gateway needs from a worker, wherever it runs. The seed pool's in-process workers
 * implement it directly; remote workers (over the worker protocol) will implement it too.
 */
import type { ChatMessage, FinishReason, GenerationRequest, Usage } from "../inference/engine.ts";

export interface WorkerJob {
  jobId: string;
  model: string;
  request: GenerationRequest;
}

export type WorkerEvent =
  | { type: "delta"; text: string }
  | {
      type: "done";
      finishReason: FinishReason;
      usage: Usage;
      /** `sha256:<hex>` of the output text as the worker saw it. */
      outputHash: string;
      /** Ed25519 signature over `proofMessage(jobId, outputHash)`. */
      signature: Uint8Array;
    };

export interface WorkerHandle {
  /** The worker's on-chain address (base58 of its Ed25519 public key). */
  readonly address: string;
  readonly staked: boolean;
  models(): string[];
  contextWindow(model: string): number;
  countPromptTokens(model: string, messages: ChatMessage[]): Promise<number>;
  /** Run a job: deltas, then one `done` with the signed proof. Ends early, without `done`, when aborted. */
  run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent>;
}
