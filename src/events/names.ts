/** The event names of the API (spec "Events") and the envelope version. Pure. */

export const EVENT_NAMES = [
  "job.submitted",
  "job.processing",
  "job.completed",
  "job.failed",
  "job.timeout",
  "job.disputed",
  "credit.low",
  "credit.topup",
  "worker.registered",
  "worker.slashed",
] as const;

export type EventName = (typeof EVENT_NAMES)[number];

/** Sent in every envelope; receivers can branch on it when the shapes change. */
export const API_VERSION = "2026-11-21";

export function isEventName(value: unknown): value is EventName {
  return typeof value === "string" && (EVENT_NAMES as readonly string[]).includes(value);
}
