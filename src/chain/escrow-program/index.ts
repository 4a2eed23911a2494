/**
 * Client of the escrow program (program/): its id, address derivations, account layouts and
 * instruction builders, from which chain.ts builds the service's transactions.
 */
export * from "./addresses.ts";
export { ESCROW_PROGRAM_PATH, escrowProgramImage } from "./artifact.ts";
export * from "./layouts.ts";
export * from "./decode.ts";
export * as escrowInstructions from "./instructions.ts";
export { DEFAULT_RULES, Op, Outcome, type BatchLock, type EscrowRules, type OutcomeName } from "./instructions.ts";
