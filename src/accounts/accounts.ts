/** Wallets and their API keys: issue, replace, authenticate. Balances live in the ledger. */
import { ApiError } from "../core/index.ts";
import { CombinedStatement, isAnyOf, rowLock, type Db } from "../store/index.ts";
import type { ApiKeyCache, KeyOwner } from "./api-key-cache.ts";
import { generateApiKey, hashApiKey, isWellFormedKey } from "./api-key.ts";

export interface Wallet {
  address: string;
  createdAt: Date;
  lastTopupAt: Date | null;
  creditLowThreshold: number;
}

export async function ensureWallet(db: Db, address: string): Promise<void> {
  await db.query("INSERT INTO wallets (address) VALUES ($1) ON CONFLICT (address) DO NOTHING", [address]);
}

export async function getWallet(db: Db, address: string): Promise<Wallet | undefined> {
  const rows = await db.query<{ address: string; created_at: Date; last_topup_at: Date | null; credit_low_threshold: number }>(
    "SELECT address, created_at, last_topup_at, credit_low_threshold FROM wallets WHERE address = $1",
    [address],
  );
  const row = rows[0];
  if (!row) return undefined;
  return { address: row.address, createdAt: row.created_at, lastTopupAt: row.last_topup_at, creditLowThreshold: row.credit_low_threshold };
}

/** Note that the wallet's balance received credits (its first deposit may create the wallet). */
export async function recordTopup(db: Db, address: string, at: Date): Promise<void> {
  await db.query(
    "INSERT INTO wallets (address, last_topup_at) VALUES ($1, $2) ON CONFLICT (address) DO UPDATE SET last_topup_at = EXCLUDED.last_topup_at",
    [address, at],
  );
}

/**
 * Issue a new key for a wallet, revoking the one it had: during beta a wallet has one key, and
 * the old key stops working on the very next request. Returns the full key; it is never stored.
 */
export async function issueApiKey(db: Db, wallet: string): Promise<string> {
  const key = generateApiKey();
  await db.transaction(async (tx) => {
    await ensureWallet(tx, wallet);
    await tx.query("UPDATE api_keys SET revoked_at = now() WHERE wallet = $1 AND revoked_at IS NULL", [wallet]);
    // A suspension is the wallet's, not one key's: a new key must not lift it.
    await tx.query("INSERT INTO api_keys (key_hash, wallet, suspended_at) VALUES ($1, $2, $3)", [hashApiKey(key), wallet, await walletSuspendedAt(tx, wallet)]);
  });
  return key;
}

/** Whether the wallet was ever issued a key. */
export async function hasApiKey(db: Db, wallet: string): Promise<boolean> {
  const rows = await db.query("SELECT 1 FROM api_keys WHERE wallet = $1 LIMIT 1", [wallet]);
  return rows.length > 0;
}

export async function revokeApiKeys(db: Db, wallet: string): Promise<void> {
  await db.query("UPDATE api_keys SET revoked_at = now() WHERE wallet = $1 AND revoked_at IS NULL", [wallet]);
}

export async function suspendApiKey(db: Db, key: string): Promise<void> {
  await db.query("UPDATE api_keys SET suspended_at = now() WHERE key_hash = $1", [hashApiKey(key)]);
}

/**
 * The wallet behind an `Authorization` header value, or the spec's authentication error. With a
 * cache, a key it holds is not looked up (api-key-cache.ts); where the cache can lag a revocation
 * made through another node, the owner carries `keyToConfirm` for the caller to confirm
 * (confirmKeys) before it spends anything.
 */
export async function authenticate(db: Db, authorization: string | undefined, cache?: ApiKeyCache): Promise<KeyOwner> {
  if (authorization === undefined || authorization.trim() === "") {
    throw new ApiError("missing_api_key", "No API key was sent. Send it as 'Authorization: Bearer svc_live_...'.");
  }
  const key = /^Bearer\s+(\S+)\s*$/i.exec(authorization)?.[1] ?? authorization;
  const keyHash = hashApiKey(key);
  const cached = cache?.get(keyHash);
  if (cached !== undefined) return cache!.mayLagRevocations ? { ...cached, keyToConfirm: keyHash } : cached;
  const mark = cache?.mark() ?? 0;
  // Every key that was sent and is not cached costs one hash and one lookup, malformed or not,
  // so the answer's timing does not tell a malformed key from an unknown one.
  const rows = await db.query<KeyRow & { wallet: string; created_at: Date }>(
    "SELECT key_hash, wallet, created_at, revoked_at, suspended_at FROM api_keys WHERE key_hash = $1",
    [keyHash],
  );
  if (!isWellFormedKey(key)) {
    throw new ApiError("invalid_api_key", "The API key is not valid. Keys look like 'svc_live_' followed by 32 letters and digits.");
  }
  const row = rows[0];
  const refused = refusal(row);
  if (refused !== undefined) throw refused;
  const owner = { wallet: row!.wallet, keyCreatedAt: row!.created_at };
  cache?.put(keyHash, owner, mark);
  return owner;
}

/**
 * Refuses, with the error `authenticate` would give now, when any of these keys (by hash) was
 * revoked, suspended or deleted, in one statement: a key accepted from a cache that had not yet
 * heard of its revocation then spends nothing. An admission confirms its keys with the wallets'
 * credit.low flags instead (lockCreditLowSides).
 */
export async function confirmKeys(db: Db, keyHashes: readonly string[]): Promise<void> {
  const wanted = [...new Set(keyHashes)];
  refuseAny(wanted, await db.query<KeyRow>(`SELECT key_hash, revoked_at, suspended_at FROM api_keys WHERE ${isAnyOf(db, "key_hash", "$1::text[]")}`, [wanted]));
}

interface KeyRow {
  key_hash: string;
  revoked_at: Date | null;
  suspended_at: Date | null;
}

/** Throws the refusal of the first key of `wanted` (by hash) that `found` shows revoked, suspended or missing. */
function refuseAny(wanted: readonly string[], found: readonly KeyRow[]): void {
  const byHash = new Map(found.map((row) => [row.key_hash, row]));
  for (const keyHash of wanted) {
    const refused = refusal(byHash.get(keyHash));
    if (refused !== undefined) throw refused;
  }
}

/** Why a key found as `row` (or not found) is refused, if it is. */
function refusal(row: KeyRow | undefined): ApiError | undefined {
  if (!row || row.revoked_at !== null) return new ApiError("invalid_api_key", "The API key does not exist or was revoked.");
  if (row.suspended_at !== null) return new ApiError("key_suspended", "This API key was suspended after a policy violation.");
  return undefined;
}

/**
 * The wallet's credit.low threshold. The event's arming flag is set from the balance now, so the
 * next time the balance falls below the new threshold is the one that fires.
 */
export async function setCreditLowThreshold(db: Db, wallet: string, thresholdCredits: number, availableCredits: number): Promise<void> {
  await ensureWallet(db, wallet);
  await db.query("UPDATE wallets SET credit_low_threshold = $2::integer, credit_low_armed = ($3::bigint >= $2::integer) WHERE address = $1", [wallet, thresholdCredits, availableCredits]);
}

/**
 * Remembers which side of its credit.low threshold the wallet's balance is on after a change.
 * Answers only when the side changed (most changes write nothing): `below` is the new side. Two
 * concurrent changes that both cross: the second waits for the first's row lock, then finds the
 * flag already flipped and gets no answer, so a crossing is reported once.
 */
export async function recordCreditLowSide(db: Db, wallet: string, availableCredits: number): Promise<{ below: boolean; thresholdCredits: number } | undefined> {
  const [flipped] = await db.query<{ armed: boolean; threshold: number }>(
    `UPDATE wallets SET credit_low_armed = ($2 >= credit_low_threshold)
      WHERE address = $1 AND credit_low_armed <> ($2 >= credit_low_threshold)
      RETURNING credit_low_armed AS armed, credit_low_threshold AS threshold`,
    [wallet, availableCredits],
  );
  return flipped && { below: !flipped.armed, thresholdCredits: flipped.threshold };
}

export interface CreditLowAnswer {
  below: boolean;
  thresholdCredits: number;
}

/**
 * recordCreditLowSide for a run of balance changes, in order, as if recorded one by one, in two
 * halves so the write can join the caller's other writes: the wallets' flags read here, locked as
 * the single update's write would lock them for the rest of the transaction; then (CreditLowSides)
 * the answers, and one update of each wallet's last side where it changed. With
 * `keysToConfirm`, the same statement confirms those keys as confirmKeys does and throws its
 * error for one refused: an admission's key check then costs no exchange of its own.
 */
export async function lockCreditLowSides(db: Db, wallets: readonly string[], keysToConfirm: readonly string[] = []): Promise<CreditLowSides> {
  const locked = `SELECT address, credit_low_armed AS armed, credit_low_threshold AS threshold FROM wallets
                   WHERE ${isAnyOf(db, "address", "$1::text[]")} ORDER BY address ${rowLock(db, "FOR NO KEY UPDATE")}`;
  const wanted = [...new Set(keysToConfirm)];
  // Only PostgreSQL's admissions have keys to confirm; an embedded database's (PGlite, SQLite)
  // read the flags alone.
  const rows = await db.query<{ address: string | null; armed: boolean | null; threshold: number | null } & Partial<KeyRow>>(
    wanted.length === 0
      ? locked
      : `SELECT address, armed, threshold, NULL AS key_hash, CAST(NULL AS timestamptz) AS revoked_at, CAST(NULL AS timestamptz) AS suspended_at FROM (${locked}) w
         UNION ALL
         SELECT NULL, NULL, NULL, key_hash, revoked_at, suspended_at FROM api_keys WHERE ${isAnyOf(db, "key_hash", "$2::text[]")}`,
    wanted.length === 0 ? [[...new Set(wallets)]] : [[...new Set(wallets)], wanted],
  );
  refuseAny(wanted, rows.flatMap((row) => (row.key_hash ? [row as KeyRow] : [])));
  return new CreditLowSides(rows.flatMap((row) => (row.address !== null ? [{ address: row.address, armed: row.armed!, threshold: row.threshold! }] : [])));
}

/**
 * For balance changes that cannot fire credit.low (they raised the balance: a charge giving back
 * the unused part of its lock), lockCreditLowSides' work without its read: each wallet's flag is set,
 * where it differs, to the side its last balance here is on, which is where recording the changes
 * one by one would leave it. A step of the caller's `statement`; it answers nothing.
 */
export function addCreditLowSides(statement: CombinedStatement, changes: readonly { wallet: string; availableCredits: number }[]): void {
  if (changes.length === 0) return;
  const last = new Map(changes.map((c) => [c.wallet, c.availableCredits]));
  const changed = statement.table(["text", "bigint"], [...last], "c", ["address", "credits"]);
  statement.step(
    "credit_low_sides_set",
    `UPDATE wallets AS w SET credit_low_armed = (c.credits >= w.credit_low_threshold)
       FROM ${changed}
      WHERE w.address = c.address AND w.credit_low_armed <> (c.credits >= w.credit_low_threshold)`,
  );
}

/** Locked credit.low flags (lockCreditLowSides): answers a run of changes, and writes the flags they flipped. */
export class CreditLowSides {
  private readonly sides: Map<string, { armed: boolean; threshold: number; stored: boolean }>;

  constructor(rows: readonly { address: string; armed: boolean; threshold: number }[]) {
    this.sides = new Map(rows.map((row) => [row.address, { armed: row.armed, threshold: row.threshold, stored: row.armed }]));
  }

  /** Each change's answer, in order, as recordCreditLowSide would give it. */
  answer(changes: readonly { wallet: string; availableCredits: number }[]): (CreditLowAnswer | undefined)[] {
    return changes.map(({ wallet, availableCredits }) => {
      const side = this.sides.get(wallet);
      if (side === undefined || side.armed === availableCredits >= side.threshold) return undefined;
      side.armed = !side.armed;
      return { below: !side.armed, thresholdCredits: side.threshold };
    });
  }

  /** The flags the answers flipped, written as a step of `statement` (none when nothing flipped). */
  addWrite(statement: CombinedStatement): void {
    const flipped = [...this.sides].filter(([, side]) => side.armed !== side.stored);
    if (flipped.length === 0) return;
    const flags = statement.table(["text", "boolean"], flipped.map(([address, side]) => [address, side.armed]), "f", ["address", "armed"]);
    statement.step("credit_low_sides_written", `UPDATE wallets AS w SET credit_low_armed = f.armed FROM ${flags} WHERE w.address = f.address`);
  }
}

/** When the wallet's live API key was made; undefined when it has none. */
export async function apiKeyCreatedAt(db: Db, wallet: string): Promise<Date | undefined> {
  const [row] = await db.query<{ created_at: Date }>(
    "SELECT created_at FROM api_keys WHERE wallet = $1 AND revoked_at IS NULL ORDER BY created_at DESC LIMIT 1",
    [wallet],
  );
  return row?.created_at;
}

/** A wallet's live API key as an operator sees it: when it was made, and its suspension if any. */
export interface LiveKeyState {
  createdAt: Date;
  suspendedAt: Date | null;
}

/**
 * Suspends the wallet's live API key: every request with it is then refused `key_suspended`, on
 * every node (the change NOTIFYs like any change of a key: schema.ts). A key already suspended
 * keeps its first time (`changed` false). Undefined when the wallet has no live key.
 */
export async function suspendWalletKey(db: Db, wallet: string): Promise<{ key: LiveKeyState; changed: boolean } | undefined> {
  return changeWalletKey(db, wallet, "suspended_at IS NULL", "now()");
}

/** Lifts the suspension of the wallet's live API key (`changed` false when it had none); undefined when the wallet has no live key. */
export async function reinstateWalletKey(db: Db, wallet: string): Promise<{ key: LiveKeyState; changed: boolean } | undefined> {
  return changeWalletKey(db, wallet, "suspended_at IS NOT NULL", "NULL");
}

async function changeWalletKey(db: Db, wallet: string, unless: string, suspendedAt: string): Promise<{ key: LiveKeyState; changed: boolean } | undefined> {
  // Only a key that changes is written: an UPDATE that changes nothing would still drop it from every node's cache.
  const [changed] = await db.query<{ created_at: Date; suspended_at: Date | null }>(
    `UPDATE api_keys SET suspended_at = ${suspendedAt} WHERE wallet = $1 AND revoked_at IS NULL AND ${unless} RETURNING created_at, suspended_at`,
    [wallet],
  );
  if (changed) return { key: { createdAt: changed.created_at, suspendedAt: changed.suspended_at }, changed: true };
  const [live] = await db.query<{ created_at: Date; suspended_at: Date | null }>("SELECT created_at, suspended_at FROM api_keys WHERE wallet = $1 AND revoked_at IS NULL", [wallet]);
  return live && { key: { createdAt: live.created_at, suspendedAt: live.suspended_at }, changed: false };
}

/**
 * Refuses a wallet whose latest key is suspended (403 key_suspended): a suspension is the
 * wallet's, so what it spends without a key (the app's playground) is refused as its key is.
 */
export async function refuseSuspendedWallet(db: Db, wallet: string): Promise<void> {
  if (await walletSuspendedAt(db, wallet)) throw new ApiError("key_suspended", "This wallet's API key was suspended after a policy violation; its credits cannot be spent until it is reinstated.");
}

/** When the wallet's latest key was suspended; null when it is not, or the wallet has no key. */
async function walletSuspendedAt(db: Db, wallet: string): Promise<Date | null> {
  // Keys made in one millisecond (SQLite keeps no finer time) tie on created_at: the live key,
  // always the last issued, is the latest.
  const [latest] = await db.query<{ suspended_at: Date | null }>(
    "SELECT suspended_at FROM api_keys WHERE wallet = $1 ORDER BY created_at DESC, (revoked_at IS NULL) DESC LIMIT 1",
    [wallet],
  );
  return latest?.suspended_at ?? null;
}
