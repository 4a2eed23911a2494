/**
 * One delivery attempt on the wire: a POST to the webhook URL over a connection to an address
 * checked beforehand. The URL's host still names the server for TLS (SNI and certificate check)
 * and for the Host header; only the DNS step is replaced by the pinned address. No redirects are
 * followed and no connection is reused.
 */
import http from "node:http";
import https from "node:https";
import type { LookupFunction } from "node:net";
import { createSecureContext, rootCertificates, type SecureContext } from "node:tls";
import type { ResolvedAddress } from "./target.ts";

export interface PostOptions {
  timeoutMs: number;
  /** From `trustContext`; made once, since building one parses every root certificate (tens of ms). */
  secureContext: SecureContext;
  signal?: AbortSignal;
}

/** The certificates a delivery trusts: the system's roots plus `extraCa` (PEM), e.g. a test receiver's. */
export function trustContext(extraCa: string[] = []): SecureContext {
  return createSecureContext(extraCa.length > 0 ? { ca: [...rootCertificates, ...extraCa] } : {});
}

export type PostOutcome = { ok: true; statusCode: number } | { ok: false; statusCode: number | null; error: string };

export function postPinned(
  url: URL,
  pinned: ResolvedAddress,
  headers: Record<string, string>,
  body: string,
  options: PostOptions,
): Promise<PostOutcome> {
  const pin: LookupFunction = (_hostname, lookupOptions, callback) => {
    if (lookupOptions.all) (callback as unknown as (e: null, a: ResolvedAddress[]) => void)(null, [pinned]);
    else callback(null, pinned.address, pinned.family);
  };
  const secure = url.protocol === "https:";
  const request = (secure ? https : http).request({
    hostname: url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname,
    port: url.port || (secure ? 443 : 80),
    path: `${url.pathname}${url.search}`,
    method: "POST",
    headers: { ...headers, "content-length": String(Buffer.byteLength(body)) },
    agent: false,
    lookup: pin,
    ...(secure ? { secureContext: options.secureContext } : {}),
  });
  return new Promise((resolve) => {
    let statusCode: number | null = null;
    let settled = false;
    const finish = (outcome: PostOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener("abort", onAbort);
      resolve(outcome);
    };
    const fail = (error: string) => {
      finish({ ok: false, statusCode, error });
      request.destroy();
    };
    const timer = setTimeout(() => fail(`no complete answer within ${options.timeoutMs} ms`), options.timeoutMs);
    const onAbort = () => fail("the delivery loop stopped");
    options.signal?.addEventListener("abort", onAbort, { once: true });
    request.on("error", (err) => fail(err.message));
    request.on("response", (response) => {
      statusCode = response.statusCode ?? null;
      response.on("error", (err) => fail(err.message));
      // The answer's body is not used; read it to the end so the exchange completes.
      response.resume();
      response.on("end", () => {
        const code = statusCode ?? 0;
        if (code >= 200 && code < 300) finish({ ok: true, statusCode: code });
        else finish({ ok: false, statusCode, error: `answered ${code}` });
      });
    });
    request.end(body);
  });
}
