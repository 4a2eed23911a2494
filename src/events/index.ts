/**
 * Events and webhooks. Emitters (./emit.ts) write events into the outbox inside the transaction
 * of the change they report; the delivery loop (./delivery.ts) sends them, signed, to the
 * subscribed webhooks of the event's account, retrying on the spec's schedule. The caller hands
 * each emitter the facts its event says (./facts.ts): this part reads no other part's records
 * and imports nothing besides core and store (test/events/boundaries.test.ts checks it).
 *
 * The service opens this part once (`openWebhooks`), hands the result to the HTTP layer (the
 * /v1/webhooks and /app/api webhook routes) and starts the delivery loop with it.
 */
import type { Logger } from "../core/index.ts";
import type { Db } from "../store/index.ts";
import { startDeliveryLoop, type DeliveryLoop, type DeliveryOutcome } from "./delivery.ts";
import { loadSecretKey, secretBox, type SecretBox } from "./secret-box.ts";
import { systemResolver, type Resolver, type TargetPolicy } from "./target.ts";

export interface WebhookOptions {
  /** Multiplies the retry delays (30 s, 5 min, 30 min, 2 h); tests use a small fraction. Default 1. */
  timeScale?: number;
  /** Development (`svc dev`): accept `http://localhost` URLs. Default false. */
  allowHttpLocalhost?: boolean;
  /** Tests: accept `https://` URLs resolving to loopback. Private and link-local never pass. Default false. */
  allowLoopback?: boolean;
  /** PEM certificates trusted for deliveries besides the system roots (a test receiver's CA). */
  trustedCa?: string | string[];
  /** The 32-byte key sealing signing secrets; else SVC_WEBHOOK_SECRET_KEY, the data dir's key file, or a per-process key. */
  secretKey?: Uint8Array;
  /** Default 10,000 (spec). */
  deliveryTimeoutMs?: number;
  /** How often the loop looks for work it was not told about (other nodes' events). Default 1,000. */
  pollIntervalMs?: number;
  /** Webhooks this node delivers to at once. Default 8. */
  concurrency?: number;
  /** DNS resolution of webhook hosts; tests substitute it to stage DNS answers. */
  resolve?: Resolver;
}

export interface Webhooks {
  db: Db;
  logger: Logger;
  secrets: SecretBox;
  policy: TargetPolicy;
  options: WebhookOptions;
}

export async function openWebhooks(input: WebhookOptions & { db: Db; logger: Logger; dataDir?: string }): Promise<Webhooks> {
  const { db, logger, dataDir, ...options } = input;
  const key = await loadSecretKey({ ...(options.secretKey ? { secretKey: options.secretKey } : {}), ...(dataDir ? { dataDir } : {}) });
  return {
    db,
    logger,
    secrets: secretBox(key),
    policy: {
      allowHttpLocalhost: options.allowHttpLocalhost ?? false,
      allowLoopback: options.allowLoopback ?? false,
      resolve: options.resolve ?? systemResolver,
    },
    options,
  };
}

/** Starts this node's delivery loop; `stop()` before closing the database. `onAttempt` hears each attempt's outcome. */
export function startWebhookDelivery(webhooks: Webhooks, onAttempt?: (outcome: DeliveryOutcome) => void): DeliveryLoop {
  const { options } = webhooks;
  const trustedCa = options.trustedCa === undefined ? [] : Array.isArray(options.trustedCa) ? options.trustedCa : [options.trustedCa];
  return startDeliveryLoop({
    db: webhooks.db,
    secrets: webhooks.secrets,
    policy: webhooks.policy,
    logger: webhooks.logger,
    timeScale: options.timeScale ?? 1,
    timeoutMs: options.deliveryTimeoutMs ?? 10_000,
    pollIntervalMs: options.pollIntervalMs ?? 1_000,
    concurrency: options.concurrency ?? 8,
    trustedCa,
    ...(onAttempt ? { onAttempt } : {}),
  });
}

export type { DeliveryLoop, DeliveryOutcome } from "./delivery.ts";
export { EVENTS_MIGRATIONS } from "./schema.ts";
export { EVENT_NAMES, API_VERSION, isEventName, type EventName } from "./names.ts";
export { RETRY_DELAYS_MS, MAX_ATTEMPTS } from "./delivery-queue.ts";
export { wakeDelivery } from "./outbox.ts";
export { parseTargetUrl, resolveTarget, TargetRefusedError } from "./target.ts";
// The routes' reads and writes of webhooks and their deliveries.
export {
  DELIVERY_STATUSES,
  deleteWebhook,
  deliveryToApi,
  getWebhook,
  insertWebhook,
  listDeliveries,
  listWebhooks,
  replayFailed,
  webhookToApi,
  type DeliveryStatus,
  type WebhookRecord,
} from "./webhook-repo.ts";
export {
  emitCreditLow,
  emitCreditTopup,
  emitJobCompleted,
  emitJobDisputed,
  emitJobEnded,
  emitJobProcessing,
  emitJobSubmitted,
  emitWorkerRegistered,
  emitWorkerSlashed,
  creditLowEvent,
  jobCompletedEvent,
  jobProcessingEvent,
  jobSubmittedEvent,
} from "./emit.ts";
export { addEvents, emitEvents, type EventsWritten, type NewEvent } from "./outbox.ts";
export type {
  CreditLowFacts,
  CreditTopupFacts,
  JobCompletedFacts,
  JobDisputedFacts,
  JobEndedFacts,
  JobFacts,
  JobProcessingFacts,
  JobSubmittedFacts,
  WorkerRegisteredFacts,
  WorkerSlashedFacts,
} from "./facts.ts";
