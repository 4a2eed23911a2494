/**
 * The network part's public surface: the worker protocol (messages, parsing, the challenge), the
 * worker interface jobs run on, the pool that routes among workers and the gateway's endpoint.
 * The gateway and the worker both take the protocol from here.
 */
export {
  CLOSE_GRACE_MS,
  closeReason,
  CloseCode,
  connectUrl,
  DEFAULT_HEARTBEAT_TIMEOUT_MS,
  encode,
  FATAL_CLOSE_CODES,
  HELD_OUTPUT_CHARS,
  HELD_OUTPUT_MS,
  MAX_GATEWAY_MESSAGE_BYTES,
  MAX_SETTLEMENT_JOBS,
  MAX_WORKER_MESSAGE_BYTES,
  PROTOCOL_VERSION,
  WORKER_CONNECT_PATH,
} from "./protocol.ts";
export type { GatewayMessage, JobFault, ModelOffer, RefusedModel, WorkerMessage } from "./protocol.ts";
export { parseGatewayMessage, parseWorkerMessage, ProtocolError, UnknownMessageError } from "./protocol-parse.ts";
export { authMessage, publicKeyOf, verifyEd25519 } from "./worker-auth.ts";
export { CALLER_LEFT, JobRequestError, SettlementRefusedError } from "./worker-handle.ts";
export type { SettlementJob, SettlementRequest, WorkerEvent, WorkerHandle, WorkerJob } from "./worker-handle.ts";
export { DEMOTE_AFTER_STRIKES, DROP_AFTER_STRIKES, WorkerHealth } from "./worker-health.ts";
export type { JobOutcome, Standing, WorkerStats } from "./worker-health.ts";
export { DEFAULT_WORKER_LIMITS } from "./worker-limits.ts";
export type { WorkerLimits } from "./worker-limits.ts";
export { WorkerPool } from "./worker-pool.ts";
export type { LeaseWanted, WorkerLease } from "./lease.ts";
export type { UnfitListener, Vetting } from "./worker-pool.ts";
export { WorkerGateway } from "./worker-gateway.ts";
export { SEED_WEIGHT, WorkerTrust, weightedVerdict } from "./worker-trust.ts";
export type { Vote } from "./worker-trust.ts";
export type { WorkerGatewayOptions } from "./worker-gateway.ts";
export { coalescedWrites } from "./write-coalescing.ts";
export { ModelOutages } from "./model-outages.ts";
export { DEFAULT_ANNOUNCE_MS, NodeBridge } from "./node-bridge.ts";
export type { NodeBridgeOptions } from "./node-bridge.ts";
export { NETWORK_MIGRATIONS } from "./schema.ts";
export { followWorkerSuspensions, listWorkerSuspensions, reinstateWorker, suspendWorker } from "./worker-suspensions.ts";
export type { WorkerSuspension } from "./worker-suspensions.ts";
