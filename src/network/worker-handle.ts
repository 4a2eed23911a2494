/**
 * What the gateway needs from a worker, wherever it runs: an in-process WorkerNode implements it
 * directly, a RemoteWorkerHandle over the worker protocol (remote-worker.ts).
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
  /**
   * Jobs it runs at once, as the worker declared it; the pool routes elsewhere while it is full.
   * Absent: no limit of its own (an in-process engine queues what it cannot run yet).
   */
  readonly concurrency?: number;
  models(): string[];
  contextWindow(model: string): number;
  countPromptTokens(model: string, messages: ChatMessage[]): Promise<number>;
  /** Run a job: deltas, then one `done` with the signed proof. Ends early, without `done`, when aborted. */
  run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent>;
  /**
   * The job's settlement confirmed and paid this worker `earnedBaseUnits` (6-decimal USDC base
   * units) in `settlementTx`. Lets a remote worker keep count of its earnings; never throws.
   */
  settled?(jobId: string, earnedBaseUnits: bigint, settlementTx: string): void;
}
