/**
 * The spec's clocks of a job, shared by the service and the escrow program's config: how long a
 * job may run before anyone can take its credits back (the timeout refund), and how long after
 * its final output token its caller may dispute it.
 */
export const JOB_TIMEOUT_MS = 120_000;
export const DISPUTE_WINDOW_MS = 60_000;
