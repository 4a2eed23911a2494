/**
 * What one client, and all of them together, may ask of the JSON-RPC server. A validator bounds
 * the same things (request bodies, batch and account counts, subscriptions, a slow reader's
 * queue); these defaults are sized for a development chain and a service's `svc verify` callers,
 * and each is an option of `startChainRpc`. docs/chain-rpc.md lists them.
 */
import { INVALID_PARAMS, RpcError } from "./errors.ts";

export interface RpcLimits {
  /** A request body, in bytes: a validator's default. */
  maxBodyBytes: number;
  /** Calls in one batch. */
  maxBatchCalls: number;
  /** Account data one request's answers may carry, summed over its batch, before encoding. */
  maxResponseDataBytes: number;
  /** Requests (HTTP, or WebSocket messages) per second from one address... */
  requestsPerSecondPerAddress: number;
  /** ...in bursts of at most this many. */
  requestBurstPerAddress: number;
  /** HTTP requests being answered at once; beyond, 429 until one ends. */
  maxRequestsInFlight: number;
  /** From a connection's first byte to its request's last, in ms. */
  requestTimeoutMs: number;
  /** WebSocket connections from one address, and in all. */
  maxConnectionsPerAddress: number;
  maxConnections: number;
  /** Subscriptions on one WebSocket connection, and in all. */
  maxSubscriptionsPerConnection: number;
  maxSubscriptions: number;
  /** Notifications a connection has not read yet, in bytes; past it the connection is dropped. */
  maxBufferedBytesPerConnection: number;
}

export const DEFAULT_RPC_LIMITS: Readonly<RpcLimits> = {
  maxBodyBytes: 50 * 1024,
  maxBatchCalls: 100,
  maxResponseDataBytes: 1024 * 1024,
  requestsPerSecondPerAddress: 50,
  requestBurstPerAddress: 100,
  maxRequestsInFlight: 8,
  requestTimeoutMs: 10_000,
  maxConnectionsPerAddress: 16,
  maxConnections: 256,
  maxSubscriptionsPerConnection: 64,
  maxSubscriptions: 2_000,
  maxBufferedBytesPerConnection: 1024 * 1024,
};

/** Solana's nodes refuse base58 above this many bytes of account data: encoding it takes time quadratic in its length. */
export const MAX_BASE58_BYTES = 128;

/** The account data one request may still return; shared by the calls of a batch. */
export class ResponseBudget {
  constructor(private leftBytes: number) {}

  /** Takes `bytes` of account data, or refuses the call that wanted them. */
  take(bytes: number): void {
    if (bytes > this.leftBytes) {
      throw new RpcError(INVALID_PARAMS, `Invalid params: the accounts asked for hold more data than one request may return; ask for fewer accounts or use dataSlice`);
    }
    this.leftBytes -= bytes;
  }
}
