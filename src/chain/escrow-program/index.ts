/**
 * Client of the escrow program (program/): its id, address derivations, account layouts and
 * instruction builders. The service moves its escrow onto these in a later step.
 */
export * from "./addresses.ts";
export { ESCROW_PROGRAM_PATH, escrowProgramImage } from "./artifact.ts";
export * from "./layouts.ts";
export * from "./decode.ts";
export * as escrowInstructions from "./instructions.ts";
export { DEFAULT_RULES, Op, Outcome, type EscrowRules, type OutcomeName } from "./instructions.ts";
