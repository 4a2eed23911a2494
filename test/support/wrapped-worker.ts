/**
 * A real worker with its `run` replaced: the test workers that misbehave (fail, stall, lie, forge,
 * serve another model) delegate everything else to the worker they wrap, through this class.
 */
import type { Signer } from "../../src/core/keys.ts";
import { proofMessage } from "../../src/core/proof.ts";
import type { ChatMessage } from "../../src/inference/engine.ts";
import type { SettlementRequest, WorkerEvent, WorkerHandle, WorkerJob } from "../../src/network/worker-handle.ts";
import { signSettlementOf } from "./settlement-signing.ts";

export abstract class WrappedWorker implements WorkerHandle {
  /** The output hashes of the proofs the wrapper made with its own key, by job id (`prove`). */
  private readonly proved = new Map<string, string>();

  constructor(
    protected readonly real: WorkerHandle,
    /** The key of the proofs it makes itself, if it makes any: it signs their settlements with it. */
    private readonly ownKey?: Signer,
  ) {}

  get address() {
    return this.real.address;
  }
  get staked() {
    return this.real.staked;
  }
  models() {
    return this.real.models();
  }
  contextWindow(model: string) {
    return this.real.contextWindow(model);
  }
  countPromptTokens(model: string, messages: ChatMessage[]) {
    return this.real.countPromptTokens(model, messages);
  }
  /**
   * Signs only what the real worker finished, a job whose output the wrapper replaced refused; a
   * wrapper with its own key signs the settlements of the proofs it made (a cheat stands by its claims).
   */
  signSettlement(request: SettlementRequest) {
    if (this.ownKey) return Promise.resolve(signSettlementOf(this.ownKey, this.proved, request));
    return this.real.signSettlement(request);
  }

  /** A proof of `hash` for the job, with the wrapper's own key, remembered for its settlement. */
  protected prove(jobId: string, hash: string): Uint8Array {
    this.proved.set(jobId, hash);
    return this.ownKey!.sign(proofMessage(jobId, hash));
  }

  abstract run(job: WorkerJob, signal: AbortSignal): AsyncIterable<WorkerEvent>;
}
