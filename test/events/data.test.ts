/** The envelope and each event's `data`: the spec's exact field lists where it gives them. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { creditLowData, jobCompletedData, jobEndedData, workerSlashedData } from "../../src/events/data.ts";
import { API_VERSION, EVENT_NAMES } from "../../src/events/names.ts";
import { envelope } from "../../src/events/outbox.ts";
import { sampleJob } from "./fixtures.ts";

test("ten event names and a date-form api_version", () => {
  assert.equal(EVENT_NAMES.length, 10);
  assert.equal(API_VERSION, "2026-11-21");
  const env = envelope("evt_01ARZ3NDEKTSV4RRFFQ69G5FAV", "credit.low", new Date("2026-11-21T10:00:00Z"), { a: 1 });
  assert.deepEqual(Object.keys(env), ["id", "event", "created_at", "api_version", "data"]);
  assert.equal(env.created_at, "2026-11-21T10:00:00.000Z");
});

test("job.completed carries exactly the spec's fields", () => {
  const job = sampleJob("W", { creditsCharged: 3, workerAddress: "Worker1", completionTokens: 520, status: "settled" });
  const data = jobCompletedData({ ...job, settlementTx: "sig", slot: 42, creditsRemaining: 97 });
  assert.deepEqual(data, {
    job_id: job.jobId,
    model: "svc-dev/wiring-model",
    tier: "lite",
    credits_charged: 3,
    usdc_value: 0.03,
    worker_address: "Worker1",
    settlement_tx: "sig",
    slot: 42,
    prompt_tokens: 11,
    completion_tokens: 520,
    credits_remaining: 97,
  });
});

test("credit.low and worker.slashed carry exactly the spec's fields", () => {
  assert.deepEqual(creditLowData({ creditsRemaining: 99, thresholdCredits: 100 }), { credits_remaining: 99, usdc_value: 0.99, threshold: 100 });
  assert.deepEqual(workerSlashedData({ workerAddress: "W", slashAmountSvc: 500, slashTx: "tx", reason: "fraudulent_proof", relatedJobId: "job_1" }), {
    worker_address: "W",
    slash_amount_svc: 500,
    slash_tx: "tx",
    reason: "fraudulent_proof",
    related_job_id: "job_1",
  });
});

test("a failed or timed-out job reports that it charged nothing and what came back", () => {
  const job = sampleJob("W", { status: "refunded", failureReason: "timeout", refundTx: "refund" });
  assert.deepEqual(jobEndedData({ ...job, creditsRefunded: job.creditsLocked, creditsRemaining: 100 }), {
    job_id: job.jobId,
    model: job.model,
    tier: "lite",
    status: "refunded",
    reason: "timeout",
    credits_charged: 0,
    credits_refunded: 4,
    credits_remaining: 100,
    refund_tx: "refund",
  });
});
