/** The embedded chain's Solana JSON-RPC server (HTTP and WebSocket). */
export { DEFAULT_RPC_PORT, startChainRpc } from "./server.ts";
export type { ChainRpcOptions, ChainRpcServer, RpcServerStats } from "./server.ts";
export { startChainRpcThread } from "./rpc-thread.ts";
export { DEFAULT_RPC_LIMITS } from "./limits.ts";
export type { RpcLimits } from "./limits.ts";
