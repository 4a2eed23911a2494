/**
 * Waits for many transactions at once: one `getSignatureStatuses` call answers up to 256
 * signatures, so every transaction in flight is checked together, at a steady pace, instead of
 * one subscription or poll per transaction. A round that fails (the node restarting, a 5xx past
 * the transport's retries) is simply followed by the next one.
 */
import type { TransactionStatus } from "../backend.ts";

/** What one signature's status lookup returns: null while the cluster has not seen it at the wanted commitment. */
export type StatusLookup = (signatures: string[]) => Promise<(TransactionStatus | null)[]>;

/** The most signatures `getSignatureStatuses` takes in one call. */
const BATCH = 256;

interface Waiter {
  resolve(status: TransactionStatus): void;
}

export class SignatureWatch {
  private readonly waiting = new Map<string, Waiter[]>();
  private timer: NodeJS.Timeout | undefined;
  private timerDueAt = 0;
  private polling = false;
  private addedDuringRound = false;
  private closed = false;
  /** When a round last reached the node; what a sender checks to tell a slow chain from an unreachable one. */
  lastReachedAt = Date.now();

  constructor(
    private readonly lookup: StatusLookup,
    /** Between rounds while signatures wait. */
    private readonly pollMs: number,
    /** Before a new signature's first check: short where the chain answers at once (`svc chain serve`). */
    private readonly firstCheckMs: number,
  ) {}

  /** Resolves once the signature has a status; never rejects (a sender stops waiting by racing it). */
  wait(signature: string): Promise<TransactionStatus> {
    return new Promise((resolve) => {
      const waiters = this.waiting.get(signature) ?? [];
      waiters.push({ resolve });
      this.waiting.set(signature, waiters);
      if (this.polling) this.addedDuringRound = true;
      else this.schedule(this.firstCheckMs);
    });
  }

  /** Stop checking a signature whose sender gave up on it. */
  forget(signature: string): void {
    this.waiting.delete(signature);
  }

  close(): void {
    this.closed = true;
    clearTimeout(this.timer);
    this.waiting.clear();
  }

  /** A round in `delayMs`, unless one is running or due sooner. */
  private schedule(delayMs: number): void {
    if (this.polling || this.closed || this.waiting.size === 0) return;
    if (this.timer && this.timerDueAt <= Date.now() + delayMs) return;
    clearTimeout(this.timer);
    this.timerDueAt = Date.now() + delayMs;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.round();
    }, delayMs);
  }

  private async round(): Promise<void> {
    this.polling = true;
    this.addedDuringRound = false;
    const signatures = [...this.waiting.keys()];
    try {
      for (let i = 0; i < signatures.length; i += BATCH) {
        const batch = signatures.slice(i, i + BATCH);
        const statuses = await this.lookup(batch);
        this.lastReachedAt = Date.now();
        batch.forEach((signature, j) => {
          const status = statuses[j];
          if (!status) return;
          for (const waiter of this.waiting.get(signature) ?? []) waiter.resolve(status);
          this.waiting.delete(signature);
        });
      }
    } catch {
      // Unreachable for now: the next round tries again; senders watch lastReachedAt.
    } finally {
      this.polling = false;
      this.schedule(this.addedDuringRound ? this.firstCheckMs : this.pollMs);
    }
  }
}
