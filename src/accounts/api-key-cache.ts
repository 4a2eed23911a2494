/**
 * The API keys this node accepted recently, so a paid request costs no key lookup in the
 * database (a third of a job's statements under load, and on PGlite a wait behind whatever
 * transaction is running). Only accepted keys are kept: an unknown, malformed, revoked or
 * suspended key is looked up every time, as before.
 *
 * A key that changes is dropped from every node's cache by the database itself: a trigger on
 * api_keys NOTIFYs its hash when the change commits (every key's, for a TRUNCATE: schema.ts),
 * and each node LISTENs. On an embedded database (PGlite, SQLite), one process, the notification
 * arrives before the revoking call returns. On PostgreSQL it arrives a moment after the commit,
 * and a request sent to another node in that moment would find the key still cached, while the
 * spec says every later request is refused. So there the cache only says whose key it is: the
 * job's admission confirms the key in its transaction (`keyToConfirm`, with the wallets'
 * credit.low flags: accounts.lockCreditLowSides), and every other route before it runs
 * (accounts.confirmKeys). While a node's listening connection is lost the cache is emptied and
 * not used, and an entry older than a minute is looked up again whatever happened.
 */
import { BoundedMap } from "../core/index.ts";
import { isEmbedded, type Db } from "../store/index.ts";
import { API_KEY_CHANGES, EVERY_API_KEY } from "./schema.ts";

/** Who a key belongs to. */
export interface KeyOwner {
  wallet: string;
  keyCreatedAt: Date;
  /** The key's hash when it was accepted from a cache that can lag its revocation: confirm it before spending. */
  keyToConfirm?: string;
}

const MAX_KEYS = 10_000;
const MAX_AGE_MS = 60_000;

export class ApiKeyCache {
  private readonly owners = new BoundedMap<{ owner: KeyOwner; cachedAtMs: number }>(MAX_KEYS);
  private listening = false;
  /** Counts the drops, so a lookup that raced one does not put back what it read before it. */
  private drops = 0;

  /** Whether a key revoked through another connection can still be found here for a moment (PostgreSQL). */
  private constructor(readonly mayLagRevocations: boolean) {}

  /** A cache kept current by the database's notifications; one that caches nothing where the database cannot notify. */
  static async open(db: Db): Promise<ApiKeyCache> {
    const cache = new ApiKeyCache(!isEmbedded(db));
    if (db.listen === undefined) return cache;
    await db.listen(API_KEY_CHANGES, {
      notified: (keyHash) => cache.drop(keyHash),
      lost: () => cache.stopUsing(),
      resumed: () => {
        cache.listening = true;
      },
    });
    cache.listening = true;
    return cache;
  }

  /** A mark to hand to `put` with what a lookup started now finds. */
  mark(): number {
    return this.drops;
  }

  get(keyHash: string): KeyOwner | undefined {
    if (!this.listening) return undefined;
    const entry = this.owners.get(keyHash);
    if (entry === undefined) return undefined;
    if (Date.now() - entry.cachedAtMs < MAX_AGE_MS) return entry.owner;
    this.owners.delete(keyHash);
    return undefined;
  }

  /** Keeps an accepted key, unless a key was dropped since `mark` (its lookup may have read the key before the change). */
  put(keyHash: string, owner: KeyOwner, mark: number): void {
    if (this.listening && mark === this.drops) this.owners.set(keyHash, { owner, cachedAtMs: Date.now() });
  }

  private drop(keyHash: string): void {
    this.drops++;
    if (keyHash === EVERY_API_KEY) this.owners.clear();
    else this.owners.delete(keyHash);
  }

  private stopUsing(): void {
    this.listening = false;
    this.drops++;
    this.owners.clear();
  }
}
