/**
 * The spec's clocks of a job, shared by the service and the escrow program's config: how long a
 * job may run before anyone can take its credits back (the timeout refund), and how long after
 * its final output token its caller may dispute it.
 */
export const JOB_TIMEOUT_MS = 120_000;
export const DISPUTE_WINDOW_MS = 60_000;
/**
 * How far a job's escrow must be from its on-chain timeout for its caller to be answered before
 * the settlement confirms. Past the timeout the wallet may refund the escrow itself, and a
 * settlement signed now can still land for about a minute (its blockhash's lifetime): closer than
 * this, the answer waits for the chain, so a caller is never told of a charge the chain then refuses.
 */
export const ANSWER_BEFORE_CONFIRM_MARGIN_MS = 60_000;
