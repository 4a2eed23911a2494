/**
 * What one worker connection, one address and one network dialing in may cost the gateway.
 * Every message a worker sends is parsed on the gateway's main thread, so a connection that sends
 * more than its jobs could explain is closed; handshakes are limited per IP and per subnet before
 * any signature is checked, so fresh keys cannot be minted into connections faster than the
 * limit; and a subnet may keep only so many workers on probation at once, so identities minted
 * across a block of addresses cannot crowd out the workers of other networks.
 */
import { TokenBucket } from "../core/index.ts";

export interface WorkerLimits {
  /** New connections per second from one IP (refused with HTTP 429 above it). */
  handshakesPerSecondPerIp: number;
  handshakeBurstPerIp: number;
  /** Connections from one IP that have not yet passed the probe. */
  pendingPerIp: number;
  /** New connections per second from one subnet (an IPv4 /24, an IPv6 /48), and their burst. */
  handshakesPerSecondPerSubnet: number;
  handshakeBurstPerSubnet: number;
  /** Registered workers on probation from one subnet; more are refused (close 4430) until some leave or are proven. */
  probationPerSubnet: number;
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
  handshakesPerSecondPerSubnet: 8,
  handshakeBurstPerSubnet: 64,
  probationPerSubnet: 16,
  messagesPerSecondPerSlot: 1_000,
  bytesPerSecond: 16 << 20,
};

/**
 * The network an address belongs to, as a key for limits: an IPv4 /24 (what one customer or one
 * cloud host's block usually holds), an IPv6 /48 (a site's allocation). IPv4 mapped into IPv6
 * counts as IPv4.
 */
export function subnetOf(ip: string): string {
  const v4 = ip.startsWith("::ffff:") ? ip.slice(7) : ip;
  if (/^\d+\.\d+\.\d+\.\d+$/.test(v4)) return `${v4.slice(0, v4.lastIndexOf("."))}.0/24`;
  const [head = "", tail] = ip.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  const groups = tail === undefined ? left : [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill("0"), ...right];
  return `${groups.slice(0, 3).map((g) => Number.parseInt(g || "0", 16).toString(16)).join(":")}::/48`;
}

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
