/**
 * What one worker connection, and one address dialing in, may cost the gateway. Every message a
 * worker sends is parsed on the gateway's main thread, so a connection that sends more than its
 * jobs could explain is closed; handshakes are limited per IP before any signature is checked,
 * so fresh keys cannot be minted into connections faster than the limit.
 */
import { TokenBucket } from "../core/index.ts";

export interface WorkerLimits {
  /** New connections per second from one IP (refused with HTTP 429 above it). */
  handshakesPerSecondPerIp: number;
  handshakeBurstPerIp: number;
  /** Connections from one IP that have not yet passed the probe. */
  pendingPerIp: number;
  /**
   * Messages per second per job slot the worker declared (a delta per token is the bulk), plus
   * the same again for heartbeats and counts; the burst is two seconds' worth.
   */
  messagesPerSecondPerSlot: number;
  /** Bytes per second of one connection's messages; the burst is two seconds' worth. */
  bytesPerSecond: number;
}

export const DEFAULT_WORKER_LIMITS: WorkerLimits = {
  handshakesPerSecondPerIp: 2,
  handshakeBurstPerIp: 30,
  pendingPerIp: 16,
  messagesPerSecondPerSlot: 1_000,
  bytesPerSecond: 16 << 20,
};

/** Slots beyond this earn no more allowance: a declared concurrency costs a liar nothing. */
const MAX_COUNTED_SLOTS = 64;

/** One connection's allowance of messages and bytes. */
export class MessageBudget {
  private messages: TokenBucket;
  private readonly bytes: TokenBucket;

  constructor(private readonly limits: WorkerLimits) {
    this.messages = this.messageBucket(1);
    this.bytes = new TokenBucket(limits.bytesPerSecond, 2 * limits.bytesPerSecond);
  }

  /** Once registered, the allowance follows the concurrency the worker declared. */
  setSlots(concurrency: number): void {
    this.messages = this.messageBucket(concurrency);
  }

  /** Whether a message of `size` bytes is within the allowance (and takes it). */
  take(size: number): boolean {
    return this.messages.take(1) === 0 && this.bytes.take(size) === 0;
  }

  private messageBucket(slots: number): TokenBucket {
    const perSecond = this.limits.messagesPerSecondPerSlot * (1 + Math.min(slots, MAX_COUNTED_SLOTS));
    return new TokenBucket(perSecond, 2 * perSecond);
  }
}
