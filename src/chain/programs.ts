/**
 * Programs the embedded chain carries from its first slot, like the token programs LiteSVM
 * brings: their bytes are committed with the code, so they are loaded at every open rather than
 * logged. Loading them is not a transaction, so the data dir keeps a note of which bytes it ran
 * under (`programs`): replaying its log under other bytes could take other branches.
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { replaceFileDurably } from "./durable-file.ts";

export interface ProgramImage {
  /** For messages: what the program is. */
  name: string;
  /** Base58 program id. */
  address: string;
  /** The sBPF ELF as built. */
  bytes: Uint8Array;
}

export function programDigest(bytes: Uint8Array): string {
  return `sha256:${createHash("sha256").update(bytes).digest("hex")}`;
}

/** `<address> sha256:<hex>` per line. */
function readNotes(path: string): Map<string, string> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return new Map();
    throw err;
  }
  const notes = new Map<string, string>();
  for (const line of text.split("\n")) {
    const [address, digest] = line.trim().split(/\s+/);
    if (address && digest) notes.set(address, digest);
  }
  return notes;
}

function writeNotes(path: string, notes: Map<string, string>): void {
  replaceFileDurably(path, Buffer.from([...notes].map(([address, digest]) => `${address} ${digest}\n`).join("")));
}

/**
 * Checks that each program's bytes are the ones the data dir's chain ran under, and notes the
 * programs it meets for the first time (a data dir from before they were part of the chain).
 * Different bytes replace the noted ones when nothing is left to replay (the chain was stopped
 * cleanly, so its last checkpoint holds all of it): what ran under the old bytes is state, and
 * only new transactions meet the new ones. With transactions to replay they are refused, since
 * replaying them under other bytes could take other branches than the ones acknowledged.
 */
export function checkProgramNotes(dir: string, programs: readonly ProgramImage[], log: { replayNeeded: boolean }): void {
  const path = join(dir, "programs");
  const notes = readNotes(path);
  let changed = false;
  for (const program of programs) {
    const digest = programDigest(program.bytes);
    const noted = notes.get(program.address);
    if (noted === digest) continue;
    if (noted !== undefined && log.replayNeeded) {
      throw new Error(
        `${dir}: this chain ran the ${program.name} program ${program.address} as ${noted}, but this build carries ${digest}, ` +
          "and its log holds transactions since its last checkpoint that must be replayed under the bytes they ran with. " +
          "Start the version that wrote this data dir once and stop it cleanly (Ctrl-C checkpoints the chain), then start this one; " +
          "or start from a new data dir (move this one away).",
      );
    }
    notes.set(program.address, digest);
    changed = true;
  }
  if (changed) writeNotes(path, notes);
}
