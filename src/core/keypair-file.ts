/**
 * Solana keypair files: a JSON array of 64 bytes (the 32-byte private key, then the public key),
 * the format of `solana-keygen`, so operators can bring the keys they already have.
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { dirname } from "node:path";
import { createKeyPairSignerFromBytes, createKeyPairSignerFromPrivateKeyBytes, getAddressEncoder, type KeyPairSigner } from "@solana/kit";

export async function loadKeypair(file: string): Promise<KeyPairSigner> {
  const bytes = JSON.parse(await readFile(file, "utf8")) as unknown;
  if (!Array.isArray(bytes) || bytes.length !== 64 || !bytes.every((b) => Number.isInteger(b) && b >= 0 && b < 256)) {
    throw new Error(`${file} is not a Solana keypair file (a JSON array of 64 bytes)`);
  }
  return createKeyPairSignerFromBytes(Uint8Array.from(bytes as number[]));
}

/** Load the keypair in `file`, creating it (mode 0600) when the file does not exist. */
export async function loadOrCreateKeypair(file: string): Promise<KeyPairSigner> {
  try {
    return await loadKeypair(file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
  }
  const privateKey = new Uint8Array(randomBytes(32));
  const signer = await createKeyPairSignerFromPrivateKeyBytes(privateKey, true);
  const publicKey = getAddressEncoder().encode(signer.address);
  await mkdir(dirname(file), { recursive: true });
  const temp = `${file}.${process.pid}.tmp`;
  await writeFile(temp, JSON.stringify([...privateKey, ...publicKey]), { mode: 0o600 });
  await rename(temp, file);
  return signer;
}
