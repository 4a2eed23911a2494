/**
 * The HTTP transport to a cluster's RPC node: kit's default transport, with retries. Providers
 * answer 429 when a client exceeds its plan and 5xx while a node restarts or falls behind, and a
 * connection can drop mid-request; all are worth another try after a pause that grows, with
 * jitter so many gateways do not retry in step, and never shorter than the server's Retry-After.
 * Retrying is safe for every call the service makes: reads, and sends of signed transactions,
 * which the cluster executes at most once per signature.
 */
import {
  SOLANA_ERROR__RPC__TRANSPORT_HTTP_ERROR,
  createDefaultRpcTransport,
  isSolanaError,
  type RpcTransport,
} from "@solana/kit";

export interface RetryPolicy {
  /** Tries after the first; 0 disables retrying. */
  retries: number;
  /** The first pause; each retry doubles it, up to `maxDelayMs`. */
  baseDelayMs: number;
  maxDelayMs: number;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = { retries: 6, baseDelayMs: 100, maxDelayMs: 5_000 };

/** How long the server asked us to wait (Retry-After, in seconds), or undefined. */
function retryAfterMs(headers: Headers | undefined): number | undefined {
  const value = headers?.get("retry-after");
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/** Whether another try may succeed, and the least pause the server asked for. */
export function retryable(err: unknown): { retry: boolean; afterMs?: number } {
  if (isSolanaError(err, SOLANA_ERROR__RPC__TRANSPORT_HTTP_ERROR)) {
    const { statusCode, headers } = err.context;
    const afterMs = retryAfterMs(headers);
    return { retry: statusCode === 429 || statusCode >= 500, ...(afterMs === undefined ? {} : { afterMs }) };
  }
  // fetch's network failures (refused, reset, closed early) are TypeErrors with a cause.
  return { retry: err instanceof TypeError && (err as { cause?: unknown }).cause !== undefined };
}

/** Full jitter: a random pause up to the exponential bound (AWS's "exponential backoff and jitter"). */
export function backoffMs(attempt: number, policy: RetryPolicy, atLeastMs = 0): number {
  const bound = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** attempt);
  return Math.max(atLeastMs, Math.random() * bound);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(done, ms);
    function done(): void {
      signal?.removeEventListener("abort", aborted);
      resolve();
    }
    function aborted(): void {
      clearTimeout(timer);
      reject(signal!.reason);
    }
    signal?.addEventListener("abort", aborted, { once: true });
  });
}

export function retryingTransport(url: string, policy: RetryPolicy = DEFAULT_RETRY_POLICY): RpcTransport {
  const inner = createDefaultRpcTransport({ url });
  return (async (config: Parameters<RpcTransport>[0]) => {
    for (let attempt = 0; ; attempt++) {
      try {
        return await inner(config);
      } catch (err) {
        const { retry, afterMs } = retryable(err);
        if (!retry || attempt >= policy.retries || config.signal?.aborted) throw err;
        await sleep(backoffMs(attempt, policy, afterMs), config.signal);
      }
    }
  }) as RpcTransport;
}
