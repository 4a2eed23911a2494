/**
 * Webhook signing secrets at rest: AES-256-GCM under a key that never enters the database, so a
 * copy of the database alone does not reveal them. The webhook id is bound in as associated data,
 * so a ciphertext moved onto another webhook's row does not decrypt.
 *
 * The key comes, in order, from the `secretKey` option, the environment variable
 * SVC_WEBHOOK_SECRET_KEY (32 bytes as 64 hex digits or base64; every gateway node sharing a
 * PostgreSQL database needs the same one), a key file `<data dir>/keys/webhook-secrets.key`
 * (created 0600 on first use), or, for a service without a data dir, a random key that lives as
 * long as the process (its webhooks' secrets are then unreadable after a restart).
 */
import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";
import { link, mkdir, open, readFile, unlink } from "node:fs/promises";
import { join } from "node:path";

export const SECRET_KEY_ENV = "SVC_WEBHOOK_SECRET_KEY";
const KEY_BYTES = 32;
const IV_BYTES = 12;
const FORMAT = "v1";

export interface SecretBox {
  seal(plaintext: string, webhookId: string): string;
  /** Throws when the ciphertext was made under another key or for another webhook. */
  open(sealed: string, webhookId: string): string;
}

export function secretBox(key: Uint8Array): SecretBox {
  if (key.length !== KEY_BYTES) throw new Error(`a webhook secret key is ${KEY_BYTES} bytes`);
  return {
    seal(plaintext, webhookId) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv("aes-256-gcm", key, iv);
      cipher.setAAD(Buffer.from(webhookId, "utf8"));
      const body = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
      return [FORMAT, iv.toString("base64"), cipher.getAuthTag().toString("base64"), body.toString("base64")].join(":");
    },
    open(sealed, webhookId) {
      const [format, iv, tag, body] = sealed.split(":");
      if (format !== FORMAT || iv === undefined || tag === undefined || body === undefined) throw new Error("unknown secret format");
      const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(iv, "base64"));
      decipher.setAAD(Buffer.from(webhookId, "utf8"));
      decipher.setAuthTag(Buffer.from(tag, "base64"));
      return Buffer.concat([decipher.update(Buffer.from(body, "base64")), decipher.final()]).toString("utf8");
    },
  };
}

export function parseKey(text: string): Uint8Array {
  const trimmed = text.trim();
  const bytes = /^[0-9a-fA-F]{64}$/.test(trimmed) ? Buffer.from(trimmed, "hex") : Buffer.from(trimmed, "base64");
  if (bytes.length !== KEY_BYTES) throw new Error(`${SECRET_KEY_ENV} must be ${KEY_BYTES} bytes as hex or base64`);
  return new Uint8Array(bytes);
}

/**
 * Reads the key file, or creates it: written whole to a temporary file and linked into place, so
 * a process starting at the same moment never reads a half-written key and both end up agreeing.
 */
async function keyFile(dataDir: string): Promise<Uint8Array> {
  const dir = join(dataDir, "keys");
  const path = join(dir, "webhook-secrets.key");
  await mkdir(dir, { recursive: true, mode: 0o700 });
  try {
    return parseKey(await readFile(path, "utf8"));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  const tmp = `${path}.${randomBytes(6).toString("hex")}.tmp`;
  const file = await open(tmp, "w", 0o600);
  try {
    await file.writeFile(randomBytes(KEY_BYTES).toString("base64"));
    await file.sync();
  } finally {
    await file.close();
  }
  try {
    await link(tmp, path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
  } finally {
    await unlink(tmp);
  }
  return parseKey(await readFile(path, "utf8"));
}

/** One per process, so every in-memory service of the process can read what another sealed. */
let processKey: Uint8Array | undefined;

export async function loadSecretKey(options: { secretKey?: Uint8Array; dataDir?: string; env?: NodeJS.ProcessEnv }): Promise<Uint8Array> {
  if (options.secretKey) return options.secretKey;
  const fromEnv = (options.env ?? process.env)[SECRET_KEY_ENV];
  if (fromEnv) return parseKey(fromEnv);
  if (options.dataDir) return keyFile(options.dataDir);
  processKey ??= new Uint8Array(randomBytes(KEY_BYTES));
  return processKey;
}
