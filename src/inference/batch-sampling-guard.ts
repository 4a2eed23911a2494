/**
 * A guard against a data race in node-llama-cpp 3.21 that hands one sequence another's next token.
 *
 * After a batch is decoded, node-llama-cpp samples each sequence's next token at once, one task per
 * sequence on libuv's thread pool. The first read of a batch's logits makes llama.cpp put its
 * output rows back in batch order (`llama_context::output_reorder`), swapping rows in place without
 * a lock. Two samplers that start together both swap, and rows end up under the wrong sequence: a
 * request gets another's token and goes on from there. 16 concurrent requests on the wiring model,
 * 300 times over: 92-214 of 4,800 replies wrong in each of seven runs without this guard, none in
 * eight with it. node-llama-cpp 3.22 takes a lock there; the registry this project installs from
 * lacks 3.22's packages for macOS and Windows, so `npm ci` cannot take it yet. Until then, the
 * first sampling after each decode runs alone, and the rest of the batch's samplings, which then
 * find the rows in order, run together as before.
 */
import type { LlamaContext } from "node-llama-cpp";

/** The methods of node-llama-cpp's native context that the guard wraps (internal to node-llama-cpp). */
interface NativeContext {
  decodeBatch(): Promise<void>;
  sampleToken(...args: unknown[]): Promise<unknown>;
}

function nativeContextOf(context: LlamaContext): NativeContext {
  const native = (context as unknown as { _ctx?: Partial<NativeContext> })._ctx;
  if (typeof native?.decodeBatch !== "function" || typeof native.sampleToken !== "function") {
    throw new Error("node-llama-cpp's context no longer has decodeBatch and sampleToken: review batch-sampling-guard.ts");
  }
  return native as NativeContext;
}

/** Makes each batch's first sampling finish before any other sampling of that batch starts. */
export function sampleFirstAloneAfterEachDecode(context: LlamaContext): void {
  const native = nativeContextOf(context);
  const decodeBatch = native.decodeBatch.bind(native);
  const sampleToken = native.sampleToken.bind(native);
  // The current batch's first sampling, settled either way; null until it has been asked for.
  let rowsInOrder: Promise<unknown> | null = null;
  // The native methods are read-only on the prototype; own properties on the instance shadow them.
  Object.defineProperty(native, "decodeBatch", {
    value: async () => {
      // node-llama-cpp awaits every sampling of a batch before it decodes the next one.
      rowsInOrder = null;
      await decodeBatch();
    },
  });
  Object.defineProperty(native, "sampleToken", {
    value: (...args: unknown[]) => {
      if (rowsInOrder !== null) return rowsInOrder.then(() => sampleToken(...args));
      const first = sampleToken(...args);
      rowsInOrder = first.catch(() => undefined);
      return first;
    },
  });
}
