/** Where the committed, verifiably built program lives (see docs/program.md). */
export const ESCROW_PROGRAM_PATH = new URL("../../../program/escrow.so", import.meta.url);
