/**
 * The worker's proof of output. The worker signs, with its Ed25519 key, the UTF-8 message
 * `<job id>:sha256:<hex>` where the job id already carries its `job_` prefix and the hash is the
 * SHA-256 of the complete output text, UTF-8, with any trailing newline removed.
 */
import { createHash } from "node:crypto";
import { verifyEd25519 } from "./keys.ts";

export function outputHash(text: string): string {
  const trimmed = text.replace(/\r?\n$/, "");
  return `sha256:${createHash("sha256").update(trimmed, "utf8").digest("hex")}`;
}

export function proofMessage(jobId: string, hash: string): Uint8Array {
  return new TextEncoder().encode(`${jobId}:${hash}`);
}

/** Whether `signature` is the worker's proof of exactly `text` for this job. */
export function proofVerifies(jobId: string, text: string, workerAddress: string, signature: Uint8Array): boolean {
  return verifyEd25519(workerAddress, proofMessage(jobId, outputHash(text)), signature);
}
