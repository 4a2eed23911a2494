/** Gateway nodes sharing one database: each node's lease on its work, and survivors taking over the dead's. */
export { DEFAULT_LEASE_MS, NodeIdInUseError, NodeLease } from "./node-lease.ts";
export type { NodeLeaseOptions } from "./node-lease.ts";
export { deploymentId } from "./deployment.ts";
export { loadNodeId } from "./node-id.ts";
export { NODES_MIGRATIONS } from "./schema.ts";
