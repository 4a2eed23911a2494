/**
 * The delivery loop: runs in the background of every gateway node, never on a request's path.
 * Each pass reads the heads of the queue (delivery-queue.ts), takes the due ones (up to
 * `concurrency` webhooks at a time, one delivery per webhook) and attempts them; then it sleeps
 * until the next head is due, a delivery finishes, an event is written in this process, or the
 * poll interval passes (events written by other nodes are found that way).
 *
 * An event is written inside its change's transaction, so the wake-up comes before the commit:
 * the loop keeps the id and looks again, a few milliseconds apart, until the row is visible (or
 * a few seconds pass: the change rolled back).
 */
import { randomUUID } from "node:crypto";
import type { Logger } from "../core/logger.ts";
import type { Db } from "../store/db.ts";
import { claim, heads, markDelivered, markFailed, releaseLeases, visibleEvents, type Claimed, type Head } from "./delivery-queue.ts";
import { onEventWritten } from "./outbox.ts";
import { postPinned, trustContext, type PostOutcome } from "./post.ts";
import type { SecretBox } from "./secret-box.ts";
import { EVENT_ID_HEADER, SIGNATURE_HEADER, signatureHeader } from "./signature.ts";
import { parseTargetUrl, resolveTarget, TargetRefusedError, type TargetPolicy } from "./target.ts";

export interface DeliveryLoopOptions {
  db: Db;
  secrets: SecretBox;
  policy: TargetPolicy;
  logger: Logger;
  /** Multiplies the retry delays; 1 in production, small in tests. */
  timeScale: number;
  /** A delivery not answered in full within this fails (spec: 10 s). */
  timeoutMs: number;
  pollIntervalMs: number;
  /** Webhooks attempted at once by this node. */
  concurrency: number;
  trustedCa: string[];
}

export interface DeliveryLoop {
  /** Stops taking deliveries, abandons the ones in flight (they will be sent again) and waits. */
  stop(): Promise<void>;
}

/** How long after a wake-up an unseen event is looked for before it is taken as rolled back. */
const EXPECT_WINDOW_MS = 5_000;
const USER_AGENT = "svc-webhooks/1";

export function startDeliveryLoop(options: DeliveryLoopOptions): DeliveryLoop {
  const { db, logger } = options;
  const leaseMs = options.timeoutMs + 20_000;
  const secureContext = trustContext(options.trustedCa);
  const abort = new AbortController();
  const inFlight = new Map<string, { token: string; done: Promise<void> }>();
  /** Event ids this process wrote that the loop has not seen committed yet: id -> [deadline, looks]. */
  const expected = new Map<string, [number, number]>();
  let timer: NodeJS.Timeout | undefined;
  let timerAt = Infinity;
  let running: Promise<void> | undefined;
  let again = false;

  const schedule = (ms: number) => {
    if (abort.signal.aborted) return;
    const at = Date.now() + Math.max(0, ms);
    if (timer !== undefined && timerAt <= at) return;
    clearTimeout(timer);
    timerAt = at;
    timer = setTimeout(() => {
      timer = undefined;
      timerAt = Infinity;
      pass();
    }, Math.max(0, ms));
    timer.unref();
  };

  const pass = () => {
    if (running) {
      again = true;
      return;
    }
    running = runPass().finally(() => {
      running = undefined;
      if (again) {
        again = false;
        schedule(0);
      }
    });
  };

  const runPass = async () => {
    let next = options.pollIntervalMs;
    try {
      // Before reading the heads, so a delivery whose event is seen here is among them.
      if (expected.size > 0) {
        for (const id of await visibleEvents(db, [...expected.keys()])) expected.delete(id);
        const now = Date.now();
        for (const [id, [deadline, looks]] of expected) {
          if (deadline < now) expected.delete(id);
          else {
            expected.set(id, [deadline, looks + 1]);
            next = Math.min(next, Math.min(2 ** looks, 200));
          }
        }
      }
      for (const head of await heads(db)) {
        if (abort.signal.aborted) return;
        if (inFlight.has(head.webhookId)) continue;
        if (head.waitMs > 0) {
          next = Math.min(next, head.waitMs);
          continue;
        }
        if (inFlight.size >= options.concurrency) continue;
        const token = randomUUID();
        const claimed = await claim(db, head, token, leaseMs);
        if (!claimed) continue;
        const done = attempt(head, claimed, token)
          .catch((err: unknown) => logger.error({ err, webhook: head.webhookId, event: head.eventId }, "webhook delivery bookkeeping failed"))
          .finally(() => {
            inFlight.delete(head.webhookId);
            schedule(0);
          });
        inFlight.set(head.webhookId, { token, done });
      }
    } catch (err) {
      if (!abort.signal.aborted) logger.error({ err }, "webhook delivery pass failed");
    } finally {
      schedule(next);
    }
  };

  const send = async (claimed: Claimed, head: Head): Promise<PostOutcome> => {
    try {
      const secret = options.secrets.open(claimed.sealedSecret, head.webhookId);
      const url = parseTargetUrl(claimed.url, options.policy);
      // Checked again now: the name may resolve elsewhere than at creation. The connection goes
      // to the address checked here, never through a second lookup.
      const [pinned] = await resolveTarget(url, options.policy);
      const t = Math.floor(Date.now() / 1000);
      return await postPinned(
        url,
        pinned!,
        {
          "content-type": "application/json",
          "user-agent": USER_AGENT,
          [SIGNATURE_HEADER]: signatureHeader(secret, claimed.body, t),
          [EVENT_ID_HEADER]: head.eventId,
          "svc-delivery-attempt": String(claimed.attempts + 1),
        },
        claimed.body,
        { timeoutMs: options.timeoutMs, secureContext, signal: abort.signal },
      );
    } catch (err) {
      if (err instanceof TargetRefusedError) return { ok: false, statusCode: null, error: err.message };
      logger.error({ err, webhook: head.webhookId }, "could not prepare a webhook delivery");
      return { ok: false, statusCode: null, error: "the delivery could not be prepared" };
    }
  };

  const attempt = async (head: Head, claimed: Claimed, token: string) => {
    const outcome = await send(claimed, head);
    // Stopping: the lease is handed back below and the delivery goes out again later.
    if (abort.signal.aborted) return;
    if (outcome.ok) {
      await markDelivered(db, head, token, outcome.statusCode);
      return;
    }
    const status = await markFailed(db, head, token, {
      attempt: claimed.attempts + 1,
      statusCode: outcome.statusCode,
      error: outcome.error,
      timeScale: options.timeScale,
    });
    const level = status === "failed" ? "warn" : "info";
    logger[level]({ webhook: head.webhookId, event: head.eventId, attempt: claimed.attempts + 1, error: outcome.error }, "webhook delivery failed");
  };

  const unsubscribe = onEventWritten((id) => {
    if (id !== undefined) expected.set(id, [Date.now() + EXPECT_WINDOW_MS, 0]);
    schedule(0);
  });
  schedule(0);

  return {
    async stop() {
      if (abort.signal.aborted) return;
      unsubscribe();
      abort.abort();
      clearTimeout(timer);
      await running;
      const open = [...inFlight.values()];
      await Promise.allSettled(open.map((f) => f.done));
      await releaseLeases(db, open.map((f) => f.token));
    },
  };
}
