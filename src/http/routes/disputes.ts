/** POST /jobs/{job_id}/dispute: a caller contests a settled job by the hash of the text it received. */
import type { FastifyInstance } from "fastify";
import type { DisputeAnswer } from "../../jobs/index.ts";
import { IDEMPOTENCY_KEY_HEADER, type IdempotencyPort, idempotently } from "../idempotency.ts";
import { ERROR_RESPONSES, idParams, int, object, str } from "../schemas.ts";

export interface DisputeRoutesOptions {
  /** Compares the hash with the worker's and opens the dispute on-chain when they differ (jobs/disputes.ts). */
  openDispute(wallet: string, jobId: string, receivedHash: string): Promise<DisputeAnswer>;
  /** The stored `Idempotency-Key`s; without it the header is not read. */
  idempotency?: IdempotencyPort;
}

const body = {
  type: "object",
  required: ["received_output_hash"],
  properties: {
    received_output_hash: {
      type: "string",
      pattern: "^sha256:[0-9a-f]{64}$",
      description: "sha256: and 64 lowercase hex digits: the SHA-256 of the complete response text, UTF-8, without one trailing newline",
    },
  },
};

const answer = object(
  {
    job_id: str,
    dispute_opened: { type: "boolean" },
    your_hash: str,
    worker_hash: str,
    dispute_tx: str,
    arbitration_window_hours: int,
  },
  ["job_id", "dispute_opened", "your_hash", "worker_hash"],
);

export async function disputeRoutes(app: FastifyInstance, options: DisputeRoutesOptions): Promise<void> {
  app.post("/jobs/:id/dispute", { schema: { params: idParams(), body, response: { 200: answer, ...ERROR_RESPONSES } }, config: { documentedHeaders: [IDEMPOTENCY_KEY_HEADER] } }, async (request, reply) => {
    const { id } = request.params as { id: string };
    const { received_output_hash: hash } = request.body as { received_output_hash: string };
    const wallet = request.owner.wallet;
    return idempotently(request, reply, options.idempotency, wallet, () => options.openDispute(wallet, id, hash));
  });
}
