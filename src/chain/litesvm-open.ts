import type { LiteSvmBackend, LiteSvmBackendOptions } from "./litesvm-backend.ts";

/**
 * LiteSVM in the calling thread, for tests and benches that need the backend itself (the service
 * runs it on the chain's own thread, chain-thread.ts). Imported on demand: LiteSVM's native module
 * holds about 20 MB that the service's main thread has no use for.
 */
export async function openLiteSvmBackend(options?: LiteSvmBackendOptions): Promise<LiteSvmBackend> {
  const { LiteSvmBackend } = await import("./litesvm-backend.ts");
  return LiteSvmBackend.open(options);
}
