import { closeSync, fsyncSync, openSync, renameSync, writeSync } from "node:fs";
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
