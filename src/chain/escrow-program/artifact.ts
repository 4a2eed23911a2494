import { readFileSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE_ROOT } from "../../core/index.ts";
import type { ProgramImage } from "../programs.ts";
import { ESCROW_PROGRAM } from "./addresses.ts";

/** Where the committed, verifiably built program lives (see docs/program.md). */
export const ESCROW_PROGRAM_PATH = join(PACKAGE_ROOT, "program", "escrow.so");

/** The committed program as the embedded chain deploys it, at its fixed id. */
export function escrowProgramImage(): ProgramImage {
  return { name: "escrow", address: ESCROW_PROGRAM, bytes: new Uint8Array(readFileSync(ESCROW_PROGRAM_PATH)) };
}
