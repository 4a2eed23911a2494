/** The admin part's public surface: the operator's actions (`svc admin`), the audit log, the admin socket. */
export { auditLog, recordAction } from "./audit.ts";
export type { AuditEntry } from "./audit.ts";
export { runOnNode } from "./client.ts";
export { ADMIN_ACTIONS, DEFAULT_LOG_LIMIT, MAX_LOG_LIMIT, TOKENIZERS, checkActor, checkOperation } from "./operation.ts";
export type { AdminAction, AdminOperation } from "./operation.ts";
export { AdminRefusal, runAdminOperation } from "./operations.ts";
export type { AdminOutcome, NodeView } from "./operations.ts";
export { ADMIN_MIGRATIONS } from "./schema.ts";
export { ADMIN_SOCKET_FILE, adminSocketPath, serveAdminSocket } from "./socket.ts";
export type { AdminSocket } from "./socket.ts";
