/** The embedded chain's Solana JSON-RPC server (HTTP and WebSocket). */
export { DEFAULT_RPC_PORT, startChainRpc } from "./server.ts";
export type { ChainRpcOptions, ChainRpcServer } from "./server.ts";
