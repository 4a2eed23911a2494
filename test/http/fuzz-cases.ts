/**
 * Generated hostile HTTP requests for the fuzz suite: methods, paths, ids, query strings, headers
 * and bodies, drawn from a seeded generator so a failing run is reproduced from its seed alone.
 */
import { prng } from "../../src/inference/wiring-model.ts";
import { MODEL } from "../support/service.ts";

/** The same seed gives the same cases. */
export const seededRandom = prng;

export class Picker {
  constructor(readonly random: () => number) {}
  int(max: number): number {
    return Math.floor(this.random() * max);
  }
  chance(p: number): boolean {
    return this.random() < p;
  }
  one<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
}

export interface FuzzCase {
  method: string;
  path: string;
  headers: [string, string][];
  body: string;
  /** Sent with `Transfer-Encoding: chunked` instead of a Content-Length. */
  chunked: boolean;
}

export interface FuzzKeys {
  /** The fuzzing wallet's valid key; its balance must only move for answered completions. */
  valid: string;
  /** A key that was revoked. */
  revoked: string;
  /** A signed-in web-app session of another wallet: its cookie, `svc_session=...` (what the /app/api routes take). */
  session: string;
}

const METHODS = ["GET", "GET", "POST", "POST", "POST", "DELETE", "PUT", "PATCH", "OPTIONS", "HEAD", "TRACE", "PROPFIND", "MKCOL", "CONNECTX"];
const ROUTES = [
  "/v1/chat/completions",
  "/v1/models",
  "/v1/models/{model}",
  "/v1/account",
  "/v1/jobs",
  "/v1/jobs/{id}",
  "/v1/webhooks",
  "/v1/webhooks/{id}",
  "/app/api/session/nonce",
  "/app/api/session",
  "/app/api/webhooks/{id}/deliveries",
  "/app/api/webhooks/{id}/replay",
  "/docs/errors",
  "/healthz",
  "/readyz",
  "/",
  "/v1",
  "/v2/chat/completions",
];
const ID_PIECES = [
  "job_01JABCDEFGHJKMNPQRSTVWXYZ0",
  "wh_01JABCDEFGHJKMNPQRSTVWXYZ0",
  "%00",
  "job_%00",
  "%zz",
  "%",
  "%E2%82",
  "%F0%9F%92%A5",
  "..",
  "%2e%2e%2f",
  "%2F",
  "a%20b",
  "'%20OR%201=1--",
  "%ff%fe",
  "x",
  "",
];
const NASTY_STRINGS = ["", "\u0000", "\ud800", "💥", "null", "svc_live_", " ", "\u202e", "<script>", "a".repeat(300), "%00", "\\", '"', MODEL, "Qwen/Qwen3-1.7B"];
const NASTY_NUMBERS = [0, -1, 1, 2, 3, 1e20, -1e20, 2 ** 53, -(2 ** 53), 2 ** 53 - 1, 1.5, -0, 1e308, -1e308, 5e-324, 4096, 10_000_001, 2049];

function id(p: Picker): string {
  const parts = Array.from({ length: 1 + p.int(2) }, () => p.one(ID_PIECES));
  if (p.chance(0.05)) parts.push("a".repeat(p.one([101, 257, 4000])));
  return parts.join("");
}

function queryString(p: Picker): string {
  if (p.chance(0.5)) return "";
  const keys = ["limit", "before", "after", "status", "model", "limit", "x", "__proto__", "constructor", ""];
  const values = ["1", "0", "-1", "100", "101", "1e3", "abc", "%00", "job_01JABCDEFGHJKMNPQRSTVWXYZ0", "settled", MODEL, "%zz", "", "a".repeat(200)];
  const pairs = Array.from({ length: 1 + p.int(4) }, () => (p.chance(0.1) ? p.one(keys) : `${p.one(keys)}=${p.one(values)}`));
  return `?${pairs.join("&")}`;
}

function path(p: Picker): string {
  let route = p.one(ROUTES).replace("{model}", p.chance(0.5) ? MODEL : id(p)).replace("{id}", id(p));
  if (p.chance(0.05)) route = route.replace("/v1/", "/v1//");
  if (p.chance(0.05)) route += "/";
  if (p.chance(0.03)) route = route.toUpperCase();
  return route + queryString(p);
}

/** A JSON value of any kind, nested up to `depth`. */
export function jsonValue(p: Picker, depth = 2): unknown {
  switch (p.int(depth > 0 ? 7 : 5)) {
    case 0:
      return p.one(NASTY_NUMBERS);
    case 1:
      return p.one(NASTY_STRINGS);
    case 2:
      return p.one([true, false]);
    case 3:
      return null;
    case 4:
      return p.random() * 4 - 2;
    case 5:
      return Array.from({ length: p.int(4) }, () => jsonValue(p, depth - 1));
    default:
      return Object.fromEntries(Array.from({ length: p.int(3) }, () => [p.one(["role", "content", "model", "__proto__", "x", ""]), jsonValue(p, depth - 1)]));
  }
}

const CHAT_FIELDS = [
  "model",
  "messages",
  "max_tokens",
  "max_completion_tokens",
  "temperature",
  "top_p",
  "seed",
  "stop",
  "frequency_penalty",
  "presence_penalty",
  "stream",
  "stream_options",
  "n",
  "tools",
  "user",
  "logit_bias",
];

/** A valid, cheap chat request with some of its fields replaced by hostile values. */
function chatBody(p: Picker): Record<string, unknown> {
  const body: Record<string, unknown> = {
    model: MODEL,
    messages: [{ role: "user", content: "Hi" }],
    max_tokens: 3,
    temperature: 0,
  };
  if (p.chance(0.3)) body.stream = true;
  for (let i = 1 + p.int(3); i > 0; i--) {
    const field = p.one(CHAT_FIELDS);
    if (p.chance(0.15)) delete body[field];
    else body[field] = jsonValue(p);
  }
  if (p.chance(0.1)) body.messages = [{ role: p.one(["user", "system", "assistant", "tool", ""]), content: jsonValue(p) }];
  if (p.chance(0.05)) body.messages = Array.from({ length: p.one([0, 2049, 3000]) }, () => ({ role: "user", content: "x" }));
  // A long prompt is refused on its length alone (context_length_exceeded) before any generation.
  if (p.chance(0.02)) body.messages = [{ role: "user", content: "word ".repeat(p.one([3000, 100_000])) }];
  // Over the 4 MiB body limit.
  if (p.chance(0.003)) body.messages = [{ role: "user", content: "x".repeat(4.5 * 1024 * 1024) }];
  return body;
}

function body(p: Picker, route: string): string {
  if (p.chance(0.1)) return p.one(["", "{", "[]", "null", "{\"a\":", "\u0000", "{}", "{\"__proto__\":{\"x\":1}}", "[".repeat(5000), "1e999", '"str"']);
  let value: unknown;
  if (route.includes("chat/completions")) value = chatBody(p);
  else if (route.includes("webhooks")) value = { url: p.one(["https://example.com/h", "http://127.0.0.1/", "ftp://x", "https://%00", "", "https://[::1]/"]), events: jsonValue(p), secret: p.one(NASTY_STRINGS) };
  else value = jsonValue(p, 3);
  return JSON.stringify(value);
}

function authorization(p: Picker, keys: FuzzKeys): [string, string][] {
  switch (p.int(9)) {
    case 0:
      return [];
    case 1:
      return [["Authorization", `Bearer ${keys.revoked}`]];
    case 2:
      return [["Authorization", p.one(["Bearer", "Bearer ", "Basic abc", `bearer ${keys.valid}`, `Bearer ${keys.valid} extra`, `Bearer ${keys.valid.slice(0, -1)}`])]];
    case 3:
      return [
        ["Authorization", `Bearer ${keys.valid}`],
        ["Authorization", `Bearer ${keys.revoked}`],
      ];
    case 4:
      return [["Authorization", `Bearer ${"k".repeat(p.one([10, 1000, 8000]))}`]];
    case 5:
      return [["Cookie", keys.session]];
    default:
      return [["Authorization", `Bearer ${keys.valid}`]];
  }
}

function headers(p: Picker, keys: FuzzKeys, method: string, route: string): [string, string][] {
  const list = authorization(p, keys);
  const jsonish = method === "POST" || p.chance(0.3);
  if (jsonish && p.chance(0.85)) list.push(["Content-Type", p.one(["application/json", "application/json", "application/json; charset=utf-8", "text/plain", "application/x-www-form-urlencoded", "multipart/form-data", "application/jsonx", "*/*", ""])]);
  if (p.chance(0.2)) list.push(["Origin", p.one(["https://a.example", "null", "http://localhost:3000"])]);
  if (p.chance(0.1)) list.push(["Access-Control-Request-Method", p.one(["POST", "GET", "DELETE", "FOO"])]);
  if (p.chance(0.1)) list.push(["X-Request-Id", p.one(["abc", "", "x".repeat(300), "a b", "req_%00", "ok-id_1.2"])]);
  if (p.chance(0.1)) list.push(["Accept", p.one(["text/event-stream", "*/*", "application/xml"])]);
  if (p.chance(0.05)) list.push(["X-Fuzz", "v".repeat(p.one([100, 5000, 20_000]))]);
  if (p.chance(0.03)) list.push(["Cookie", "svc_session=forged"]);
  if (p.chance(0.03) && route.startsWith("/v1")) list.push(["Expect", "100-continue"]);
  return list;
}

/** A completion request that pays or is refused on one field: what must never charge when refused. */
function chatCase(p: Picker, keys: FuzzKeys): FuzzCase {
  const headers: [string, string][] = [["Authorization", `Bearer ${keys.valid}`], ["Content-Type", "application/json"]];
  if (p.chance(0.2)) headers.push(...authorization(p, keys));
  return { method: "POST", path: "/v1/chat/completions", headers, body: JSON.stringify(chatBody(p)), chunked: p.chance(0.05) };
}

export function fuzzCase(p: Picker, keys: FuzzKeys): FuzzCase {
  if (p.chance(0.15)) return chatCase(p, keys);
  const method = p.one(METHODS);
  const target = path(p);
  const takesBody = !["GET", "HEAD"].includes(method) && (method !== "DELETE" || p.chance(0.3));
  return {
    method,
    path: target,
    headers: headers(p, keys, method, target),
    body: takesBody ? body(p, target) : "",
    chunked: takesBody && p.chance(0.05),
  };
}
