/**
 * A hostile worker identity of the kind anyone can mint for free: a fresh key that passes the
 * gateway's entry like an honest worker, then answers every job with the same text under a valid
 * proof of that text, and every count at once. Many of them acting together are the sybils of
 * the network tests. It keeps count of the jobs it was given.
 */
import { connectRawWorker, type HelloOptions, type RawWorker } from "./raw-worker.ts";

export interface SybilWorker {
  raw: RawWorker;
  address: string;
  /** Jobs it received since it registered. */
  jobs: number;
  close(): void;
}

/** Connects, registers (answering the entry's jobs like an honest worker would), then serves `text` to every job. */
export async function startSybil(origin: string, text: string, hello: HelloOptions = {}): Promise<SybilWorker> {
  const raw = await connectRawWorker(origin);
  await raw.register(hello);
  const sybil: SybilWorker = { raw, address: raw.signer.address, jobs: 0, close: () => raw.close() };
  void (async () => {
    for (;;) {
      const message = await raw.next(["count", "job"], 600_000).catch(() => undefined);
      if (message === undefined) return;
      if (message.type === "count") raw.send({ type: "count_result", requestId: message.requestId, tokens: 10 });
      else {
        sybil.jobs++;
        raw.finish(message.jobId, text, 1);
      }
    }
  })();
  return sybil;
}
