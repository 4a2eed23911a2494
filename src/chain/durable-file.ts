import { closeSync, fsyncSync, openSync, renameSync, writeSync } from "node:fs";
import { open, rename } from "node:fs/promises";
import { dirname } from "node:path";

/**
 * Replaces the file at `path` with `data` so that a crash at any moment leaves either the old
 * file or the new one, never a torn one: write a temporary file, sync it, rename it over the old
 * one, then sync the directory so the rename itself is on disk.
 */
export function replaceFileDurably(path: string, data: Uint8Array): void {
  const tmp = `${path}.tmp`;
  const fd = openSync(tmp, "w", 0o600);
  try {
    let written = 0;
    while (written < data.length) written += writeSync(fd, data, written, data.length - written);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  const dir = openSync(dirname(path), "r");
  try {
    fsyncSync(dir);
  } finally {
    closeSync(dir);
  }
}

/** replaceFileDurably without holding the thread: the I/O runs on libuv's pool. */
export async function replaceFileDurablyAsync(path: string, data: Uint8Array): Promise<void> {
  const tmp = `${path}.tmp`;
  const file = await open(tmp, "w", 0o600);
  try {
    await file.writeFile(data);
    await file.sync();
  } finally {
    await file.close();
  }
  await rename(tmp, path);
  const dir = await open(dirname(path), "r");
  try {
    await dir.sync();
  } finally {
    await dir.close();
  }
}
