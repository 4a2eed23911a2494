/**
 * Whether a webhook URL may be called, judged on the addresses its host resolves to: checked at
 * creation and again before every attempt, and the attempt then connects to the address that was
 * checked (see post.ts), so a DNS answer that changes in between cannot redirect it.
 */
import { lookup as dnsLookup } from "node:dns/promises";
import { isIP } from "node:net";
import { classifyAddress } from "./address-policy.ts";

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

export type Resolver = (hostname: string) => Promise<ResolvedAddress[]>;

export interface TargetPolicy {
  /** Development: `http://localhost` (also 127.0.0.1 and [::1]) is accepted, reaching loopback only. */
  allowHttpLocalhost: boolean;
  /** Tests: `https://` URLs may resolve to loopback addresses. Private and link-local never pass. */
  allowLoopback: boolean;
  resolve: Resolver;
}

/** Why a URL may not be called; the message is shown to the API caller. */
export class TargetRefusedError extends Error {
  override readonly name = "TargetRefusedError";
}

const MAX_URL_LENGTH = 2048;
const LOCALHOST_NAMES = new Set(["localhost", "127.0.0.1", "[::1]"]);
const RESOLVE_TIMEOUT_MS = 5_000;

export const systemResolver: Resolver = async (hostname) => {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new TargetRefusedError(`The host ${hostname} did not resolve in time.`)), RESOLVE_TIMEOUT_MS);
  });
  try {
    const answers = await Promise.race([dnsLookup(hostname, { all: true, verbatim: true }), timeout]);
    return answers.map((a) => ({ address: a.address, family: a.family === 6 ? 6 : 4 }));
  } finally {
    clearTimeout(timer);
  }
};

export function isDevLocalhost(url: URL, policy: Pick<TargetPolicy, "allowHttpLocalhost">): boolean {
  return policy.allowHttpLocalhost && url.protocol === "http:" && LOCALHOST_NAMES.has(url.hostname);
}

/** The URL's form alone: scheme, no credentials, a host. Throws TargetRefusedError. */
export function parseTargetUrl(raw: string, policy: Pick<TargetPolicy, "allowHttpLocalhost">): URL {
  if (raw.length > MAX_URL_LENGTH) throw new TargetRefusedError(`The URL is longer than ${MAX_URL_LENGTH} characters.`);
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TargetRefusedError("The URL is not a valid absolute URL.");
  }
  if (url.protocol !== "https:" && !isDevLocalhost(url, policy)) {
    throw new TargetRefusedError("Webhook URLs must use https://.");
  }
  if (url.username !== "" || url.password !== "") throw new TargetRefusedError("Webhook URLs must not carry credentials.");
  if (url.hostname === "") throw new TargetRefusedError("The URL has no host.");
  return url;
}

/**
 * Every address the URL's host resolves to, each one allowed by the policy; throws
 * TargetRefusedError when the host does not resolve or any address is not allowed.
 */
export async function resolveTarget(url: URL, policy: TargetPolicy): Promise<ResolvedAddress[]> {
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
  const literal = isIP(host);
  let addresses: ResolvedAddress[];
  if (literal !== 0) {
    addresses = [{ address: host, family: literal === 6 ? 6 : 4 }];
  } else {
    try {
      addresses = await policy.resolve(host);
    } catch (err) {
      if (err instanceof TargetRefusedError) throw err;
      throw new TargetRefusedError(`The host ${host} could not be resolved.`);
    }
    if (addresses.length === 0) throw new TargetRefusedError(`The host ${host} could not be resolved.`);
  }
  const loopbackAllowed = isDevLocalhost(url, policy) || (policy.allowLoopback && url.protocol === "https:");
  for (const { address } of addresses) {
    const kind = classifyAddress(address);
    if (kind === "public" && !isDevLocalhost(url, policy)) continue;
    if (kind === "loopback" && loopbackAllowed) continue;
    throw new TargetRefusedError(
      literal !== 0
        ? `Webhook URLs must not point at private, loopback or link-local addresses (${address}).`
        : `Webhook URLs must not resolve to private, loopback or link-local addresses (${host} resolves to ${address}).`,
    );
  }
  return addresses;
}
