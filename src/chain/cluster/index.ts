/** The chain as a Solana cluster over JSON-RPC: the backend `openChain` uses when given a URL. */
export { ClusterBackend } from "./cluster-backend.ts";
export type { ClusterBackendOptions } from "./cluster-backend.ts";
export { DEFAULT_RETRY_POLICY } from "./transport.ts";
export type { RetryPolicy } from "./transport.ts";
