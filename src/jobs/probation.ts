/**
 * Probation checks (DECISIONS "An open network"; docs/workers.md, "Probation"). A worker that
 * the operator does not vouch for and no stake backs gets no caller's job until it is proven, so
 * a key minted for free can neither serve a caller a wrong answer nor stall one. Its checks ride
 * on callers' jobs: while a job runs on a vouched worker, the same request, with the same seed
 * and limits, runs on a free worker on probation under a job id of its own, at the caller's
 * moment, with a real prompt: nothing tells it from a paid job before it is done. Its output is
 * never relayed nor charged. Once the caller's job has finished, the two output hashes are
 * compared: the same, a check passed (enough prove the worker); another, the vouched worker's
 * word outweighs a worker on probation's (network/worker-trust.ts) and it is suspended. No output
 * in time, a proof that does not verify, or more text than the job's limit allows is a strike.
 */
import { type Logger, newId, outputHash, proofVerifies } from "../core/index.ts";
import { DEFAULT_MAX_TOKEN_BYTES } from "../inference/index.ts";
import { type JobOutcome, type WorkerEvent, type WorkerJob, type WorkerLease, type WorkerPool, type WorkerTrust, weightedVerdict } from "../network/index.ts";

/** Checks running at once, at most: each holds a worker on probation and its output in memory. */
const MAX_CHECKS_AT_ONCE = 64;

export interface ProbationOptions {
  pool: WorkerPool;
  trust: WorkerTrust;
  logger: Logger;
  /** The job's whole time: a check not done by then is stalled. */
  timeoutMs: number;
  /** A check with no output this long after it started is stalled. */
  firstTokenTimeoutMs: number;
}

/** A check beside a caller's job, to judge once that job has finished. */
export interface ProbationCheck {
  /** The caller's job finished on its vouched worker with output of this hash: judge the check by it. */
  judge(referenceHash: string): void;
  /** The caller's job ended otherwise (failed, cut short, moved): the check proves nothing. */
  drop(): void;
}

/** What the worker on probation produced. */
interface CheckRun {
  text: string;
  done?: Extract<WorkerEvent, { type: "done" }>;
  fault?: JobOutcome;
}

export class Probation {
  private running = 0;

  constructor(private readonly o: ProbationOptions) {}

  /**
   * Starts a check of a free worker on probation beside a caller's job that runs on `reference`,
   * when `reference` is vouched for and one is free; the job's `request` is run as it is.
   */
  beside(job: WorkerJob, reference: string, minContextWindow: number): ProbationCheck | undefined {
    if (this.running >= MAX_CHECKS_AT_ONCE || this.o.pool.vetting(reference) !== "vouched") return undefined;
    const lease = this.o.pool.acquire(job.model, { onProbation: true, minContextWindow });
    if (lease === undefined) return undefined;
    this.running++;
    const abort = new AbortController();
    const check = { ...job, jobId: newId("job") };
    const ran = this.run(lease, check, abort.signal).finally(() => {
      this.running--;
      lease.release();
    });
    return {
      judge: (referenceHash) => void this.judge(lease, check.jobId, ran, { reference, referenceHash }).catch((error: unknown) => this.o.logger.error({ err: error, worker: lease.worker.address }, "a probation check could not be judged")),
      drop: () => abort.abort(),
    };
  }

  /** Runs the check, bounded in time and in text; never throws. */
  private async run(lease: WorkerLease, job: WorkerJob, dropped: AbortSignal): Promise<CheckRun> {
    const abort = new AbortController();
    const stop = () => abort.abort();
    dropped.addEventListener("abort", stop, { once: true });
    let stalled = false;
    const stall = (ms: number) => setTimeout(() => ((stalled = true), abort.abort()), ms);
    let firstToken = stall(this.o.firstTokenTimeoutMs);
    const whole = stall(this.o.timeoutMs);
    const maxBytes = job.request.maxTokens * DEFAULT_MAX_TOKEN_BYTES;
    const result: CheckRun = { text: "" };
    try {
      for await (const event of lease.worker.run(job, abort.signal)) {
        if (event.type === "done") result.done = event;
        else if ((result.text += event.text).length > maxBytes) return { ...result, fault: "overstated" };
        clearTimeout(firstToken);
      }
      if (result.done === undefined && !dropped.aborted) result.fault = stalled ? "stalled" : "failed";
    } catch {
      result.fault = "failed";
    } finally {
      clearTimeout(firstToken);
      clearTimeout(whole);
      dropped.removeEventListener("abort", stop);
    }
    return result;
  }

  private async judge(lease: WorkerLease, jobId: string, ran: Promise<CheckRun>, against: { reference: string; referenceHash: string }): Promise<void> {
    const { text, done, fault } = await ran;
    const worker = lease.worker.address;
    if (fault !== undefined || done === undefined || !proofVerifies(jobId, text, worker, done.signature)) {
      lease.outcome(fault ?? "failed");
      this.o.logger.info({ worker, outcome: fault ?? "failed" }, "a worker on probation failed a check");
      return;
    }
    if (outputHash(text) === against.referenceHash) {
      lease.outcome("served");
      this.o.pool.checkPassed(worker);
      if (this.o.pool.vetting(worker) === "proven") this.o.logger.info({ worker }, "a worker passed its probation; its jobs are sold from now on");
      return;
    }
    const [accused, reference] = await Promise.all([this.o.trust.weight(worker), this.o.trust.weight(against.reference)]);
    if (weightedVerdict(accused, [{ hash: against.referenceHash, weight: reference }]) !== against.referenceHash) return;
    this.o.logger.warn({ worker, reference: against.reference }, "a worker on probation produced other output than a vouched worker for the same request; suspended");
    this.o.pool.suspend(worker);
  }
}
