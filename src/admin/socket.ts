/**
 * The admin socket of a node on the embedded store: its database is opened by one process, so
 * `svc admin` asks the running node to act on its own database, over HTTP on a Unix domain socket
 * at `<dataDir>/admin.sock`. The socket file's mode, 0600, is the credential: only the OS user
 * owning the data dir (and root) can connect. It never listens on the network.
 */
import { request } from "node:http";
import { chmod, mkdtemp, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import Fastify, { type FastifyInstance } from "fastify";
import type { Logger } from "../core/index.ts";
import type { Db } from "../store/index.ts";
import { ADMIN_ACTIONS, MAX_ACTOR_CHARS, checkActor, checkOperation } from "./operation.ts";
import { AdminRefusal, type NodeView, runAdminOperation } from "./operations.ts";

export const ADMIN_SOCKET_FILE = "admin.sock";
export const ADMIN_PATH = "/operations";
/** An operation's body is a few hundred bytes; a model's description is the longest part. */
const MAX_BODY_BYTES = 16 * 1024;
/** sockaddr_un's path on Linux, less its terminating NUL. */
const MAX_SOCKET_PATH_BYTES = 107;

/** The socket's request: the operation, checked further by checkOperation, and who asks. */
const BODY_SCHEMA = {
  type: "object",
  required: ["operation", "by"],
  additionalProperties: false,
  properties: {
    by: { type: "string", minLength: 1, maxLength: MAX_ACTOR_CHARS },
    operation: { type: "object", required: ["action"], maxProperties: 8, properties: { action: { type: "string", enum: [...ADMIN_ACTIONS] } } },
  },
} as const;

export interface AdminSocket {
  path: string;
  close(): Promise<void>;
}

export function adminSocketPath(dataDir: string): string {
  return join(dataDir, ADMIN_SOCKET_FILE);
}

/**
 * Serves the admin socket of the node whose database is `db`. A socket file left by a node that
 * died is replaced; one a live process answers on is refused: two processes on one data dir
 * would corrupt its database.
 */
export async function serveAdminSocket(options: { db: Db; dataDir: string; logger: Logger; node?: NodeView }): Promise<AdminSocket> {
  const path = adminSocketPath(options.dataDir);
  if (await answers(path)) throw new Error(`another svc process serves ${path}: one process at a time owns the data dir ${options.dataDir}`);
  await rm(path, { force: true });
  const app = adminApp(options);
  await app.ready();
  await listenPrivately(app, path, options.dataDir);
  return {
    path,
    close: async () => {
      app.server.closeIdleConnections();
      await app.close();
      await rm(path, { force: true });
    },
  };
}

function adminApp(options: { db: Db; logger: Logger; node?: NodeView }): FastifyInstance {
  const app = Fastify({ bodyLimit: MAX_BODY_BYTES, logger: false });
  app.post(ADMIN_PATH, { schema: { body: BODY_SCHEMA } }, async (request, reply) => {
    const body = request.body as { operation: unknown; by: string };
    const operation = checkOperation(body.operation);
    const by = checkActor(body.by);
    if (!operation.ok) return reply.code(400).send({ usage: operation.message });
    if (!by.ok) return reply.code(400).send({ usage: by.message });
    try {
      const outcome = await runAdminOperation(options.db, operation.value, by.value, options.node);
      options.logger.info({ action: operation.value.action, by: by.value }, "admin action");
      return outcome;
    } catch (error) {
      if (error instanceof AdminRefusal) return reply.code(409).send({ refused: error.message });
      options.logger.error({ err: error, action: operation.value.action }, "admin action failed");
      return reply.code(500).send({ failed: "the node could not run the operation; its log says why" });
    }
  });
  return app;
}

/**
 * Listens at `path` with mode 0600 from the start: the socket is made in a new directory only
 * this user can enter, narrowed, and then moved into place, so nobody else ever finds it open.
 */
async function listenPrivately(app: FastifyInstance, path: string, dataDir: string): Promise<void> {
  const scratch = await mkdtemp(join(dataDir, ".a-"));
  const made = join(scratch, "s");
  // Node would cut a longer path short and listen somewhere else.
  const longest = Math.max(Buffer.byteLength(path), Buffer.byteLength(made));
  if (longest > MAX_SOCKET_PATH_BYTES) {
    await rm(scratch, { recursive: true, force: true });
    throw new Error(`the data dir's path is too long for its admin socket ${path}: a Unix socket's path takes at most ${MAX_SOCKET_PATH_BYTES} bytes; use a shorter data dir`);
  }
  try {
    await new Promise<void>((resolve, reject) => {
      app.server.once("error", reject);
      app.server.listen(made, () => {
        app.server.off("error", reject);
        resolve();
      });
    });
    await chmod(made, 0o600);
    await rename(made, path);
  } catch (error) {
    await app.close();
    throw error;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** Whether a process answers at `path`. */
function answers(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const probe = request({ socketPath: path, method: "HEAD", path: "/", agent: false, timeout: 2_000 }, (response) => {
      response.resume();
      resolve(true);
    });
    probe.on("timeout", () => probe.destroy(new Error("timeout")));
    probe.on("error", (error: NodeJS.ErrnoException) => resolve(error.code !== "ENOENT" && error.code !== "ECONNREFUSED"));
    probe.end();
  });
}
