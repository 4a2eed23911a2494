/**
 * The probe: before a new worker gets callers' jobs, it runs a short job of the gateway's own for
 * each model it offers. The job has no caller, charges nothing and sends no chain transaction; its
 * proof is checked here with the same Ed25519 verification the settlement transaction runs
 * on-chain. A worker that cannot produce a verified output in time is not admitted.
 */
import { newId, proofVerifies } from "../core/index.ts";
import { completionTokensAtMost, type GenerationRequest } from "../inference/index.ts";
import type { WorkerEvent, WorkerHandle } from "./worker-handle.ts";

export const DEFAULT_PROBE_TIMEOUT_MS = 30_000;

/** Greedy and a few tokens long: any model answers it in well under a second on a GPU. */
export const PROBE_REQUEST: GenerationRequest = {
  messages: [{ role: "user", content: "Hello" }],
  maxTokens: 4,
  temperature: 0,
  topP: 1,
  stop: [],
  frequencyPenalty: 0,
  presencePenalty: 0,
};

/** Passed, with its time to first token (the worker's first latency sample); or why not. */
export type ProbeResult = { ok: true; firstTokenMs: number } | { ok: false; reason: string };

/** Runs the probe job on `worker` for `model`; resolves with why it failed, never rejects. */
export async function probeWorker(worker: WorkerHandle, model: string, timeoutMs = DEFAULT_PROBE_TIMEOUT_MS): Promise<ProbeResult> {
  // A caller's job id: the worker cannot tell the probe from paid work by its id.
  const jobId = newId("job");
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  let text = "";
  let done: Extract<WorkerEvent, { type: "done" }> | undefined;
  const started = performance.now();
  let firstTokenMs = 0;
  try {
    for await (const event of worker.run({ jobId, model, request: PROBE_REQUEST }, abort.signal)) {
      if (event.type === "delta") {
        if (text === "") firstTokenMs = performance.now() - started;
        text += event.text;
      } else done = event;
    }
  } catch (error) {
    return { ok: false, reason: `the probe job failed: ${error instanceof Error ? error.message : String(error)}` };
  } finally {
    clearTimeout(timer);
  }
  if (done === undefined) return { ok: false, reason: `no finished probe job within ${timeoutMs} ms` };
  const refused = await judge(worker.address, jobId, text, done);
  return refused ? { ok: false, reason: refused } : { ok: true, firstTokenMs };
}

/** Why the probe's output refuses the worker, or undefined when it passes. */
async function judge(address: string, jobId: string, text: string, done: Extract<WorkerEvent, { type: "done" }>): Promise<string | undefined> {
  if (text === "") return "the probe job produced no output";
  if (!proofVerifies(jobId, text, address, done.signature)) {
    return "the probe job's proof does not verify against its output";
  }
  const most = Math.min(PROBE_REQUEST.maxTokens, completionTokensAtMost({ text, stop: PROBE_REQUEST.stop, finishReason: done.finishReason }));
  if (done.usage.completionTokens > most) {
    return `the probe job claimed ${done.usage.completionTokens} completion tokens; its output holds at most ${most}`;
  }
  return undefined;
}
