/**
 * Escrow tables on the admitting node: a wallet's jobs take the next slots of its current table
 * (program op `lock_batch`), those admitted together in one lock transaction, so a job's lock
 * costs a share of one signature and about 12 bytes of rent instead of an account of its own.
 *
 * The program takes a lock only at the table's next slot, so the locks of one table must land in
 * the order they were signed: each is sent once the one signed before it on that table has
 * landed or failed (`sendInTurn`). A lock that fails leaves the slots after it unreachable; the
 * table then takes no more locks, and the locks already signed behind it are refused and go
 * alone, each into a table of its own (`prepareLockAlone`). Table ids come from the database in
 * blocks and are never given out twice, since a table's address is derived from its id.
 */
import { MAX_TABLE_LOCKS_PER_TRANSACTION, type Chain, type ChainAction } from "../chain/index.ts";
import type { Tier } from "../core/index.ts";
import { spelled, type Db } from "../store/index.ts";

/** A job's lock into a slot of an escrow table (an escrow action: job-chain.ts); `params` say which. */
export type TableLock = ChainAction & { escrowAddress: string; params: { tableId: number; tableSlot: number } };

/** A job to lock: its wallet, tier and price. */
export interface JobToLock {
  jobId: string;
  tier: Tier;
  wallet: string;
  credits: number;
}

/**
 * How long after its first lock was signed a table takes new ones: the program's 60 s, less a
 * margin for the last lock to land.
 */
export const TABLE_APPEND_MS = 45_000;
/** A table's slots: at least this many; twice what the wallet's previous table held, up to the program's 255. */
export const MIN_TABLE_CAPACITY = 8;
export const MAX_TABLE_CAPACITY = 255;
/** Table ids taken from the database at once (migration jobs/007_escrow_tables). */
const TABLE_ID_BLOCK = 1024;
/**
 * How long a job whose lock is signed later (lockLater) waits at most for the wallet's next jobs
 * before its lock is signed with theirs: a job's credits are locked on-chain at most this long
 * after its admission reserved them, unless it needs its lock sooner (`hurry`).
 */
export const LOCK_LINGER_MS = 200;
/** Wallets whose table is remembered; past it, those whose table takes no more locks are forgotten. */
const REMEMBERED_WALLETS = 10_000;

interface OpenTable {
  tableId: number;
  capacity: number;
  /** The next slot a lock signed here takes. */
  next: number;
  openedAtMs: number;
  /** A lock on it failed: the slots after it can no longer be taken. */
  broken: boolean;
  /** Settles once the latest lock signed on it has landed or failed. */
  tail: Promise<void>;
}

/** A signed lock's place in its table's order: sent after `gate`; `done` opens the next one's. */
interface Turn {
  wallet: string;
  tableId: number;
  gate: Promise<void>;
  done: () => void;
}

/** A job's lock taken out of its lane before it was signed (EscrowTables.withdraw). */
export class LockWithdrawnError extends Error {
  override readonly name = "LockWithdrawnError";
  constructor(readonly jobId: string, readonly reason: string) {
    super(`job ${jobId} ended (${reason}) before its escrow lock was signed`);
  }
}

/** A wallet's jobs waiting to have their locks signed together (lockLater). */
interface Lane {
  waiting: { job: JobToLock; resolve: (lock: TableLock) => void; reject: (error: unknown) => void }[];
  timer: NodeJS.Timeout;
}

export class EscrowTables {
  /** Each wallet's current table. */
  private readonly tables = new Map<string, OpenTable>();
  /** The turns of signed locks not yet sent, by signature. */
  private readonly turns = new Map<string, Turn>();
  /** Each wallet's jobs whose locks wait to be signed together. */
  private readonly lanes = new Map<string, Lane>();
  private ids = { next: 0, end: 0 };

  /**
   * `record` writes locks signed later (lockLater) to the chain journal and their jobs' rows, in
   * one transaction, before they are sent.
   */
  constructor(
    private readonly chain: Chain,
    private readonly db: Db,
    private readonly record: (locks: readonly TableLock[]) => Promise<void>,
    private readonly lingerMs = LOCK_LINGER_MS,
  ) {}

  /**
   * A job admitted without its lock: its lock, signed with the wallet's other jobs waiting (up to
   * a transaction's worth, or LOCK_LINGER_MS after the first of them) and recorded. Rejects when
   * it could not be signed or recorded: nothing is on its way to the chain then.
   */
  lockLater(job: JobToLock): Promise<TableLock> {
    return new Promise((resolve, reject) => {
      let lane = this.lanes.get(job.wallet);
      if (!lane) {
        lane = { waiting: [], timer: setTimeout(() => this.hurry(job.wallet), this.lingerMs) };
        this.lanes.set(job.wallet, lane);
      }
      lane.waiting.push({ job, resolve, reject });
      if (lane.waiting.length >= MAX_TABLE_LOCKS_PER_TRANSACTION) this.hurry(job.wallet);
    });
  }

  /**
   * Signs the wallet's waiting locks now, when one of them is `jobId`'s (or with no job named):
   * that job needs its lock on the chain.
   */
  hurry(wallet: string, jobId?: string): void {
    const lane = this.lanes.get(wallet);
    if (!lane || (jobId !== undefined && !lane.waiting.some((w) => w.job.jobId === jobId))) return;
    this.lanes.delete(wallet);
    clearTimeout(lane.timer);
    const { waiting } = lane;
    const signing = this.prepareLocks(this.db, waiting.map((w) => w.job));
    signing
      .then(async (locks) => {
        await this.record(locks).catch((error: unknown) => {
          this.discard(locks);
          throw error;
        });
        waiting.forEach((w, i) => w.resolve(locks[i]!));
      })
      .catch((error: unknown) => waiting.forEach((w) => w.reject(error)));
  }

  /**
   * Takes `jobId`'s lock out of its wallet's lane while it still waits there, for a job that ended
   * with nothing to charge: its lock is never signed, nothing goes to the chain, and its promise
   * rejects with LockWithdrawnError. False when the lock was signed already (or never waited).
   */
  withdraw(wallet: string, jobId: string, reason: string): boolean {
    const lane = this.lanes.get(wallet);
    const at = lane ? lane.waiting.findIndex((w) => w.job.jobId === jobId) : -1;
    if (!lane || at < 0) return false;
    const [withdrawn] = lane.waiting.splice(at, 1);
    if (lane.waiting.length === 0) {
      clearTimeout(lane.timer);
      this.lanes.delete(wallet);
    }
    withdrawn!.reject(new LockWithdrawnError(jobId, reason));
    return true;
  }

  /** Signs every lane's waiting locks now (the node is stopping). */
  hurryAll(): void {
    for (const wallet of [...this.lanes.keys()]) this.hurry(wallet);
  }

  /**
   * The jobs' locks, in their order: each wallet's jobs into the next slots of its table, up to
   * MAX_TABLE_LOCKS_PER_TRANSACTION to a transaction. The slots are taken when it is called, and
   * given back by `discard` if the locks are not kept.
   */
  async prepareLocks(db: Db, jobs: readonly JobToLock[]): Promise<TableLock[]> {
    const byWallet = new Map<string, JobToLock[]>();
    for (const job of jobs) byWallet.set(job.wallet, [...(byWallet.get(job.wallet) ?? []), job]);
    const batches: { wallet: string; table: OpenTable; firstSlot: number; jobs: JobToLock[]; turn: Turn }[] = [];
    for (const [wallet, walletJobs] of byWallet) {
      for (let at = 0; at < walletJobs.length; ) {
        const table = await this.tableFor(db, wallet);
        // Another call may have filled it while this one awaited: then the next round opens one.
        if (!takesLocks(table, Date.now())) continue;
        const count = Math.min(walletJobs.length - at, table.capacity - table.next, MAX_TABLE_LOCKS_PER_TRANSACTION);
        // Slots and turn taken together, with no await between: another call's lock comes after.
        batches.push({ wallet, table, firstSlot: table.next, jobs: walletJobs.slice(at, at + count), turn: takeTurn(wallet, table) });
        table.next += count;
        at += count;
      }
    }
    const settled = await Promise.allSettled(batches.map((batch) => this.signLock(batch)));
    const failed = settled.find((r) => r.status === "rejected");
    const signed = settled.flatMap((r) => (r.status === "fulfilled" ? [r.value] : []));
    if (failed) {
      // All or none: the locks signed beside a failed one are not sent, and their turns pass.
      this.discard(signed.flat());
      throw failed.reason;
    }
    const byJob = new Map(signed.flat().map((lock) => [lock.subject, lock]));
    return jobs.map((job) => byJob.get(job.jobId)!);
  }

  /** A job's lock into a new table of its own, for one whose shared lock the chain refused. */
  async prepareLockAlone(db: Db, job: JobToLock): Promise<TableLock> {
    const tableId = await this.takeTableId(db);
    const prepared = await this.chain.prepareTableLock({ wallet: job.wallet, tableId: BigInt(tableId), capacity: 1, firstSlot: 0, jobs: [job] });
    return { kind: "escrow", subject: job.jobId, signature: prepared.signature, wire: prepared.wire, escrowAddress: prepared.tableAddress, params: { tableId, tableSlot: 0 } };
  }

  /** Locks signed by `prepareLocks` that will not be sent: their slots are taken again, or their tables take no more. */
  discard(locks: readonly ChainAction[]): void {
    for (const signature of new Set(locks.map((lock) => lock.signature))) {
      const turn = this.turns.get(signature);
      if (!turn) continue;
      this.turns.delete(signature);
      const table = this.tables.get(turn.wallet);
      const mine = locks.filter((lock) => lock.signature === signature);
      const firstSlot = Math.min(...mine.map((lock) => (lock as TableLock).params.tableSlot));
      // The latest lock of its table gives its slots back; one with locks signed after it cannot.
      if (table?.tableId === turn.tableId && table.next === firstSlot + mine.length) table.next = firstSlot;
      else if (table?.tableId === turn.tableId) table.broken = true;
      turn.done();
    }
  }

  /**
   * Sends a lock with `send` once the lock signed before it on its table has landed or failed.
   * A lock that does not land as signed (refused, replaced by its copy alone, never landed)
   * leaves its table taking no more locks.
   */
  async sendInTurn<T extends { action: ChainAction }>(lock: ChainAction, send: () => Promise<T>): Promise<T> {
    const turn = this.turns.get(lock.signature);
    if (!turn) return send();
    await turn.gate;
    // The lock's other jobs share its transaction and its one trip to the chain (ChainJournal).
    this.turns.delete(lock.signature);
    try {
      const sent = await send();
      if (sent.action.signature !== lock.signature) this.breakTable(turn);
      return sent;
    } catch (error) {
      this.breakTable(turn);
      throw error;
    } finally {
      turn.done();
    }
  }

  private breakTable(turn: Turn): void {
    const table = this.tables.get(turn.wallet);
    if (table?.tableId === turn.tableId) table.broken = true;
  }

  /** The wallet's table with a free slot that still takes locks: its current one, or a new one. */
  private async tableFor(db: Db, wallet: string): Promise<OpenTable> {
    const current = this.tables.get(wallet);
    if (current && takesLocks(current, Date.now())) return current;
    const tableId = await this.takeTableId(db);
    // Another call may have opened one meanwhile: it is used first, and this id is never used.
    const opened = this.tables.get(wallet);
    if (opened && opened !== current && takesLocks(opened, Date.now())) return opened;
    const held = current?.next ?? 0;
    const capacity = Math.min(MAX_TABLE_CAPACITY, Math.max(MIN_TABLE_CAPACITY, 2 * held));
    const table: OpenTable = { tableId, capacity, next: 0, openedAtMs: Date.now(), broken: false, tail: current?.tail ?? Promise.resolve() };
    if (!current && this.tables.size >= REMEMBERED_WALLETS) this.forgetClosedTables();
    this.tables.set(wallet, table);
    return table;
  }

  private async signLock({ wallet, table, firstSlot, jobs, turn }: { wallet: string; table: OpenTable; firstSlot: number; jobs: readonly JobToLock[]; turn: Turn }): Promise<TableLock[]> {
    const prepared = await this.chain
      .prepareTableLock({ wallet, tableId: BigInt(table.tableId), capacity: table.capacity, firstSlot, jobs })
      .catch((error: unknown) => {
        // Its slots stay unlocked: the table takes no more, and whatever waits on its turn goes on.
        table.broken = true;
        turn.done();
        throw error;
      });
    this.turns.set(prepared.signature, turn);
    const shared = jobs.length > 1;
    return jobs.map((job, i) => ({
      kind: "escrow",
      subject: job.jobId,
      signature: prepared.signature,
      wire: prepared.wire,
      escrowAddress: prepared.tableAddress,
      params: { tableId: table.tableId, tableSlot: firstSlot + i },
      ...(shared ? { shared } : {}),
    }));
  }

  private async takeTableId(db: Db): Promise<number> {
    if (this.ids.next >= this.ids.end) {
      const [row] = await db.query<{ block: bigint }>(
        spelled(db, { postgres: "SELECT nextval('escrow_table_id_blocks') AS block", sqlite: "UPDATE escrow_table_id_blocks SET last_block = last_block + 1 RETURNING last_block AS block" }),
      );
      const start = Number(row!.block) * TABLE_ID_BLOCK;
      this.ids = { next: start, end: start + TABLE_ID_BLOCK };
    }
    return this.ids.next++;
  }

  private forgetClosedTables(): void {
    const now = Date.now();
    for (const [wallet, table] of this.tables) if (!takesLocks(table, now)) this.tables.delete(wallet);
  }
}

/** The next place in the table's order of sends: after the lock signed before it. */
function takeTurn(wallet: string, table: OpenTable): Turn {
  let done!: () => void;
  const turn: Turn = { wallet, tableId: table.tableId, gate: table.tail, done: () => done() };
  table.tail = new Promise<void>((resolve) => (done = resolve));
  return turn;
}

function takesLocks(table: OpenTable, nowMs: number): boolean {
  return !table.broken && table.next < table.capacity && nowMs - table.openedAtMs < TABLE_APPEND_MS;
}
