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
import type { SecureContext } from "node:tls";
import type { Logger } from "../core/index.ts";
import type { Db } from "../store/index.ts";
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
  /** Told how each attempt ended: delivered, failed and to be retried, or failed for the last time. */
  onAttempt?: (outcome: DeliveryOutcome) => void;
}

export type DeliveryOutcome = "delivered" | "retrying" | "failed";

export interface DeliveryLoop {
  /** Stops taking deliveries, abandons the ones in flight (they will be sent again) and waits. */
  stop(): Promise<void>;
}

/** How long after a wake-up an unseen event is looked for before it is taken as rolled back. */
const EXPECT_WINDOW_MS = 5_000;
const USER_AGENT = "svc-webhooks/1";

export function startDeliveryLoop(options: DeliveryLoopOptions): DeliveryLoop {
  const loop = new Deliverer(options);
  loop.start();
  return { stop: () => loop.stop() };
}

interface InFlight {
  token: string;
  done: Promise<void>;
}

/** An event this process wrote that the loop has not seen committed yet. */
interface Expected {
  deadline: number;
  looks: number;
}

/** The loop's state and its steps: schedule a pass, run it, attempt a delivery, stop. */
class Deliverer {
  private readonly db: Db;
  private readonly logger: Logger;
  private readonly leaseMs: number;
  private readonly secureContext: SecureContext;
  private readonly abort = new AbortController();
  /** By webhook id: at most one delivery per webhook at a time keeps its events in order. */
  private readonly inFlight = new Map<string, InFlight>();
  private readonly expected = new Map<string, Expected>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private running: Promise<void> | undefined;
  /** A pass was asked for while one ran: run another as soon as it ends. */
  private again = false;
  private unsubscribe: () => void = () => undefined;

  constructor(private readonly options: DeliveryLoopOptions) {
    this.db = options.db;
    this.logger = options.logger;
    // Longer than an attempt can take, so a live node's lease never runs out under it.
    this.leaseMs = options.timeoutMs + 20_000;
    this.secureContext = trustContext(options.trustedCa);
  }

  start(): void {
    this.unsubscribe = onEventWritten((id) => {
      if (id !== undefined) this.expected.set(id, { deadline: Date.now() + EXPECT_WINDOW_MS, looks: 0 });
      this.schedule(0);
    });
    this.schedule(0);
  }

  /** Stops taking deliveries, abandons the ones in flight (they will be sent again) and waits. */
  async stop(): Promise<void> {
    if (this.abort.signal.aborted) return;
    this.unsubscribe();
    this.abort.abort();
    clearTimeout(this.timer);
    await this.running;
    const open = [...this.inFlight.values()];
    await Promise.allSettled(open.map((f) => f.done));
    await releaseLeases(this.db, open.map((f) => f.token));
  }

  /** Runs a pass in `ms`, unless one is already due sooner. */
  private schedule(ms: number): void {
    if (this.abort.signal.aborted) return;
    const at = Date.now() + Math.max(0, ms);
    if (this.timer !== undefined && this.timerAt <= at) return;
    clearTimeout(this.timer);
    this.timerAt = at;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.timerAt = Infinity;
      this.pass();
    }, Math.max(0, ms));
    this.timer.unref();
  }

  /** One pass at a time; a request during a pass runs another right after it. */
  private pass(): void {
    if (this.running) {
      this.again = true;
      return;
    }
    this.running = this.runPass().finally(() => {
      this.running = undefined;
      if (this.again) {
        this.again = false;
        this.schedule(0);
      }
    });
  }

  private async runPass(): Promise<void> {
    let next = this.options.pollIntervalMs;
    try {
      // Before reading the heads, so a delivery whose event is seen here is among them.
      next = Math.min(next, await this.lookForExpected());
      next = Math.min(next, await this.takeDueHeads());
    } catch (err) {
      if (!this.abort.signal.aborted) this.logger.error({ err }, "webhook delivery pass failed");
    } finally {
      this.schedule(next);
    }
  }

  /**
   * Forgets the expected events now committed, or past their deadline (rolled back). Returns
   * when to look again for the rest: soon at first, backing off to 200 ms.
   */
  private async lookForExpected(): Promise<number> {
    if (this.expected.size === 0) return Infinity;
    for (const id of await visibleEvents(this.db, [...this.expected.keys()])) this.expected.delete(id);
    const now = Date.now();
    let next = Infinity;
    for (const [id, { deadline, looks }] of this.expected) {
      if (deadline < now) {
        this.expected.delete(id);
        continue;
      }
      this.expected.set(id, { deadline, looks: looks + 1 });
      next = Math.min(next, 2 ** looks, 200);
    }
    return next;
  }

  /** Claims and starts every due head it has room for. Returns how long until the next head is due. */
  private async takeDueHeads(): Promise<number> {
    let next = Infinity;
    for (const head of await heads(this.db)) {
      if (this.abort.signal.aborted) break;
      if (this.inFlight.has(head.webhookId)) continue;
      if (head.waitMs > 0) {
        next = Math.min(next, head.waitMs);
        continue;
      }
      if (this.inFlight.size >= this.options.concurrency) continue;
      const token = randomUUID();
      const claimed = await claim(this.db, head, token, this.leaseMs);
      if (claimed) this.startAttempt(head, claimed, token);
    }
    return next;
  }

  private startAttempt(head: Head, claimed: Claimed, token: string): void {
    const done = this.attempt(head, claimed, token)
      .catch((err: unknown) => this.logger.error({ err, webhook: head.webhookId, event: head.eventId }, "webhook delivery bookkeeping failed"))
      .finally(() => {
        this.inFlight.delete(head.webhookId);
        this.schedule(0);
      });
    this.inFlight.set(head.webhookId, { token, done });
  }

  /** Sends the delivery and records the outcome: delivered, or failed and retried on the spec's schedule. */
  private async attempt(head: Head, claimed: Claimed, token: string): Promise<void> {
    const outcome = await this.send(claimed, head);
    // Stopping: the lease is handed back by stop() and the delivery goes out again later.
    if (this.abort.signal.aborted) return;
    if (outcome.ok) {
      await markDelivered(this.db, head, token, outcome.statusCode);
      this.options.onAttempt?.("delivered");
      return;
    }
    const attempt = claimed.attempts + 1;
    const status = await markFailed(this.db, head, token, { attempt, statusCode: outcome.statusCode, error: outcome.error, timeScale: this.options.timeScale });
    if (status !== undefined) this.options.onAttempt?.(status === "failed" ? "failed" : "retrying");
    const level = status === "failed" ? "warn" : "info";
    this.logger[level]({ webhook: head.webhookId, event: head.eventId, attempt, error: outcome.error }, "webhook delivery failed");
  }

  /** One signed POST to the address checked just now. Never throws: a failure is an outcome. */
  private async send(claimed: Claimed, head: Head): Promise<PostOutcome> {
    const { options } = this;
    try {
      const secret = options.secrets.open(claimed.sealedSecret, head.webhookId);
      const url = parseTargetUrl(claimed.url, options.policy);
      // Checked again now: the name may resolve elsewhere than at creation. The connection goes
      // to the address checked here, never through a second lookup.
      const [pinned] = await resolveTarget(url, options.policy);
      const t = Math.floor(Date.now() / 1000);
      const headers = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        [SIGNATURE_HEADER]: signatureHeader(secret, claimed.body, t),
        [EVENT_ID_HEADER]: head.eventId,
        "svc-delivery-attempt": String(claimed.attempts + 1),
      };
      return await postPinned(url, pinned!, headers, claimed.body, { timeoutMs: options.timeoutMs, secureContext: this.secureContext, signal: this.abort.signal });
    } catch (err) {
      if (err instanceof TargetRefusedError) return { ok: false, statusCode: null, error: err.message };
      this.logger.error({ err, webhook: head.webhookId }, "could not prepare a webhook delivery");
      return { ok: false, statusCode: null, error: "the delivery could not be prepared" };
    }
  }
}
