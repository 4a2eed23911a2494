/**
 * A worker: runs jobs on its inference engines and signs a proof of each output with its key.
 * The proof is the Ed25519 signature over `<job id>:sha256:<hex>` of the exact output text. The
 * worker also remembers each finished job's output hash so that it can sign a settlement of many
 * of its jobs at once: the escrow program pays a table's slots against one such signature, and
 * the worker signs a leaf only with the output hash it recorded itself.
 */
import { BoundedMap, base58Decode, outputHash, proofMessage, settlementMessageOf, type Signer } from "../core/index.ts";
import { ContextLengthExceededError, type ChatMessage, type Engine } from "../inference/index.ts";
import { JobRequestError, SettlementRefusedError, type SettlementRequest, type WorkerEvent, type WorkerHandle, type WorkerJob } from "../network/index.ts";

/** Finished jobs whose output hash a worker remembers for their settlement (about 100 bytes each); the oldest go first. */
export const REMEMBERED_JOBS = 50_000;

export class WorkerNode implements WorkerHandle {
  readonly address: string;
  /** The output hash of each job it finished, by job id. */
  private readonly finished = new BoundedMap<Uint8Array>(REMEMBERED_JOBS);

  constructor(
    private readonly signer: Signer,
    private readonly engines: ReadonlyMap<string, Engine>,
    readonly staked = false,
  ) {
    this.address = signer.address;
  }

  models(): string[] {
    return [...this.engines.keys()];
  }

  contextWindow(model: string): number {
    return this.engine(model).contextWindow;
  }

  countPromptTokens(model: string, messages: ChatMessage[]): Promise<number> {
    return this.engine(model).countPromptTokens(messages);
  }

  async *run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent> {
    let text = "";
    try {
      for await (const event of this.engine(job.model).generate(job.request, signal)) {
        if (event.type === "delta") {
          text += event.text;
          yield event;
          continue;
        }
        const hash = outputHash(text);
        const signature = this.signer.sign(proofMessage(job.jobId, hash));
        this.finished.set(job.jobId, Buffer.from(hash.slice("sha256:".length), "hex"));
        yield { type: "done", finishReason: event.finishReason, usage: event.usage, outputHash: hash, signature };
      }
    } catch (error) {
      // A request that does not fit, or that an engine refuses as given, would fail on any worker.
      if (error instanceof ContextLengthExceededError || error instanceof RangeError) throw new JobRequestError(error.message);
      throw error;
    }
  }

  async signSettlement(request: SettlementRequest): Promise<Uint8Array> {
    const seen = new Set<string>();
    const jobs = request.jobs.map((job) => {
      const hash = this.finished.get(job.jobId);
      if (!hash) throw new SettlementRefusedError(`worker ${this.address} did not finish job ${job.jobId} (or no longer remembers it)`);
      if (seen.has(job.jobId)) throw new SettlementRefusedError(`job ${job.jobId} is named twice`);
      seen.add(job.jobId);
      return { ...job, outputHash: hash };
    });
    let table: Uint8Array;
    try {
      table = base58Decode(request.table, 32);
    } catch {
      throw new SettlementRefusedError(`not an address: ${request.table}`);
    }
    return this.signer.sign(settlementMessageOf(table, jobs));
  }

  private engine(model: string): Engine {
    const engine = this.engines.get(model);
    if (!engine) throw new Error(`worker ${this.address} does not serve ${model}`);
    return engine;
  }
}
