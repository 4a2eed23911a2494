/**
 * Hostile worker identities of the kind anyone can mint for free: a fresh key that passes the
 * gateway's entry like an honest worker, then does the same thing with every job: answers it
 * with one fixed text under a valid proof of that text (`{ answer }`), never answers it
 * (`"stall"`), or refuses it and every count as the request's fault (`"refuse"`). Counts are
 * answered at once except by a refuser. Each keeps count of the jobs it was given.
 */
import type { Signer } from "../../src/core/keys.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { connectRawWorker, type HelloOptions, type RawWorker } from "./raw-worker.ts";

export type SybilBehaviour = { answer: string } | "stall" | "refuse";

export interface SybilWorker {
  raw: RawWorker;
  address: string;
  /** Jobs it received since it registered. */
  jobs: number;
  close(): void;
}

export interface SybilOptions {
  hello?: HelloOptions;
  signer?: Signer;
  /** The loopback address it dials from. */
  localAddress?: string;
}

/** Connects, registers (answering the entry's jobs like an honest worker would), then behaves as told. */
export async function startSybil(origin: string, behaviour: SybilBehaviour, options: SybilOptions = {}): Promise<SybilWorker> {
  const raw = await connectRawWorker(origin, options.signer ?? generateKeypair(), options.localAddress ? { localAddress: options.localAddress } : {});
  await raw.register(options.hello);
  const sybil: SybilWorker = { raw, address: raw.signer.address, jobs: 0, close: () => raw.close() };
  void (async () => {
    for (;;) {
      const message = await raw.next(["count", "job"], 600_000).catch(() => undefined);
      if (message === undefined) return;
      if (message.type === "count") {
        if (behaviour === "refuse") raw.send({ type: "count_error", requestId: message.requestId, message: "cannot count this prompt" });
        else raw.send({ type: "count_result", requestId: message.requestId, tokens: 10 });
        continue;
      }
      sybil.jobs++;
      if (behaviour === "refuse") raw.send({ type: "job_error", jobId: message.jobId, message: "cannot run this request", fault: "request" });
      else if (behaviour !== "stall") raw.finish(message.jobId, behaviour.answer, 1);
    }
  })();
  return sybil;
}
