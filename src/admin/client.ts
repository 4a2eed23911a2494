/** `svc admin`'s end of a node's admin socket (socket.ts). */
import { request } from "node:http";
import type { AdminOperation } from "./operation.ts";
import { AdminRefusal, type AdminOutcome } from "./operations.ts";
import { ADMIN_PATH, adminSocketPath } from "./socket.ts";

/** The longest answer read: a log of the most entries allowed, with long reasons, is well under it. */
const MAX_ANSWER_BYTES = 4 * 1024 * 1024;
const ANSWER_TIMEOUT_MS = 60_000;

/**
 * Has the node running on `dataDir` take the operation; undefined when no node is running there
 * (no socket, or a socket file its dead node left). A refusal throws AdminRefusal.
 */
export async function runOnNode(dataDir: string, operation: AdminOperation, by: string): Promise<AdminOutcome | undefined> {
  const answer = await post(adminSocketPath(dataDir), JSON.stringify({ operation, by }));
  if (answer === undefined) return undefined;
  const body = parse(answer.body);
  if (answer.status === 200 && Array.isArray(body?.lines)) return { lines: body.lines.map(String) };
  if (answer.status === 409 && typeof body?.refused === "string") throw new AdminRefusal(body.refused);
  const said = body?.usage ?? body?.failed ?? body?.message ?? answer.body.slice(0, 200);
  throw new Error(`the node on ${dataDir} answered ${answer.status}: ${String(said)}`);
}

function parse(text: string): Record<string, unknown> | undefined {
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

function post(socketPath: string, body: string): Promise<{ status: number; body: string } | undefined> {
  return new Promise((resolve, reject) => {
    const req = request(
      { socketPath, method: "POST", path: ADMIN_PATH, agent: false, timeout: ANSWER_TIMEOUT_MS, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) } },
      (response) => {
        const chunks: Buffer[] = [];
        let size = 0;
        response.on("data", (chunk: Buffer) => {
          size += chunk.length;
          if (size > MAX_ANSWER_BYTES) return void req.destroy(new Error(`the node's answer is over ${MAX_ANSWER_BYTES} bytes`));
          chunks.push(chunk);
        });
        response.on("end", () => resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString("utf8") }));
        response.on("error", reject);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`the node did not answer within ${ANSWER_TIMEOUT_MS / 1000} s`)));
    req.on("error", (error: NodeJS.ErrnoException) => (error.code === "ENOENT" || error.code === "ECONNREFUSED" ? resolve(undefined) : reject(error)));
    req.end(body);
  });
}
