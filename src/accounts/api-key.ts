/** API key format (spec "Authentication"): `svc_live_` + 32 characters of [A-Za-z0-9]. Pure. */
import { createHash, randomInt } from "node:crypto";

export const KEY_PREFIX = "svc_live_";
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const KEY_PATTERN = /^svc_live_[A-Za-z0-9]{32}$/;

export function generateApiKey(): string {
  let body = "";
  // randomInt draws without modulo bias.
  for (let i = 0; i < 32; i++) body += ALPHABET[randomInt(ALPHABET.length)];
  return KEY_PREFIX + body;
}

export function isWellFormedKey(key: string): boolean {
  return KEY_PATTERN.test(key);
}

export function hashApiKey(key: string): string {
  return createHash("sha256").update(key, "utf8").digest("hex");
}
