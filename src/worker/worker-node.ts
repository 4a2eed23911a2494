/**
 * A worker: runs jobs on its inference engines and signs a proof of each output with its key.
 * The proof is the Ed25519 signature over `<job id>:sha256:<hex>` of the exact output text,
 * which the settlement transaction verifies on-chain before the worker is paid.
 */
import { type Signer, outputHash, proofMessage } from "../core/index.ts";
import { ContextLengthExceededError, type ChatMessage, type Engine } from "../inference/index.ts";
import { JobRequestError, type WorkerEvent, type WorkerHandle, type WorkerJob } from "../network/index.ts";

export class WorkerNode implements WorkerHandle {
  readonly address: string;

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
        yield { type: "done", finishReason: event.finishReason, usage: event.usage, outputHash: hash, signature };
      }
    } catch (error) {
      // A request that does not fit, or that an engine refuses as given, would fail on any worker.
      if (error instanceof ContextLengthExceededError || error instanceof RangeError) throw new JobRequestError(error.message);
      throw error;
    }
  }

  private engine(model: string): Engine {
    const engine = this.engines.get(model);
    if (!engine) throw new Error(`worker ${this.address} does not serve ${model}`);
    return engine;
  }
}
