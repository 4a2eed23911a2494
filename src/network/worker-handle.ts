/**
 * What the gateway needs from a worker, wherever it runs: an in-process WorkerNode implements it
 * directly, a RemoteWorkerHandle over the worker protocol (remote-worker.ts).
 */
import type { ChatMessage, GenerationRequest, StopReason, Usage } from "../inference/index.ts";

export interface WorkerJob {
  jobId: string;
  model: string;
  request: GenerationRequest;
  /** False when the caller reads the output only at its end: a remote worker may then send it in fewer pieces. */
  stream?: boolean;
}

export type WorkerEvent =
  | { type: "delta"; text: string }
  | {
      type: "done";
      /** "cancelled": the job was stopped mid-way and the proof covers the output up to the stop. */
      finishReason: StopReason;
      usage: Usage;
      /** `sha256:<hex>` of the output text as the worker saw it. */
      outputHash: string;
      /** Ed25519 signature over `proofMessage(jobId, outputHash)`. */
      signature: Uint8Array;
    };

/**
 * One job of a settlement the gateway asks a worker to sign: its slot of the table, its charge in
 * USDC base units and the tokens it was charged for (the gateway's count where it has the model's
 * tokenizer, which may differ from the worker's claim).
 */
export interface SettlementJob {
  jobId: string;
  slot: number;
  charge: bigint;
  promptTokens: number;
  completionTokens: number;
}

/** A batch of one worker's jobs of one escrow table (base58 address) to settle under one signature. */
export interface SettlementRequest {
  table: string;
  jobs: readonly SettlementJob[];
}

/**
 * The abort reason for a job whose caller went away: what the worker generated up to then is
 * still signed and charged (a timeout or a failover abandons the job instead).
 */
export const CALLER_LEFT = "caller_left";

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
  /**
   * Run a job: deltas, then one `done` with the signed proof. Aborting `signal` with the reason
   * CALLER_LEFT stops the job and lets it end with a `done` ("cancelled") over the output produced
   * so far, when there is any; aborted for any other reason it ends at once, without `done`.
   */
  run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent>;
  /**
   * The job's settlement confirmed and paid this worker `earnedBaseUnits` (6-decimal USDC base
   * units) in `settlementTx`. Lets a remote worker keep count of its earnings; never throws.
   */
  settled?(jobId: string, earnedBaseUnits: bigint, settlementTx: string): void;
  /**
   * Signs the settlement of jobs it finished: `settlementMessage` over the table, the Merkle root of
   * the jobs' leaves (job id, the output hash the worker recorded itself, the tokens charged) and
   * each job's slot and charge. Rejects when a job is not one it finished (or has forgotten).
   */
  signSettlement(request: SettlementRequest): Promise<Uint8Array>;
}

/** A worker would not sign a settlement: a job in it is not one it finished, or the request is malformed. */
export class SettlementRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "SettlementRefusedError";
  }
}

/**
 * The job cannot run as the request stands (a worker could not read it, or it does not fit): it is
 * the request's fault, not the worker's, so the job is not handed to another worker, which would
 * fail it the same way.
 */
export class JobRequestError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "JobRequestError";
  }
}
