/**
 * Group commit: work items that arrive while one group's transaction runs are done together in
 * the next, in one transaction with one commit, by a function that can write many rows per
 * statement. Under load an item then costs a fraction of a transaction of its own; an item that
 * arrives with nothing in flight waits only for the current turn of the event loop, so the
 * I/O callbacks of that turn can join it.
 *
 * A group is all or nothing: when its transaction fails, each of its items is done again alone,
 * so an item that fails fails by itself with its own error and the others go through.
 */
import type { Db } from "./db.ts";

/** Does `items` inside `tx`, returning one result per item, in order. */
export type GroupWork<I, R> = (tx: Db, items: readonly I[]) => Promise<R[]>;

interface Waiting<I, R> {
  item: I;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

export interface GroupCommitOptions<I = unknown> {
  /** Items in one group at most: bounds a statement's parameters. */
  maxGroup?: number;
  /**
   * The work is one statement, atomic by itself (a CombinedStatement): it runs on the database
   * with no BEGIN and COMMIT around it, which on PostgreSQL are two round trips of their own.
   */
  oneStatement?: boolean;
  /**
   * Told of the items of a group whose transaction failed, before each is done again alone, and
   * of an item that failed alone: whatever the work took for them outside the database (a
   * reservation in memory) is theirs to give back.
   */
  failed?: (items: readonly I[]) => void;
  /**
   * Run for each group before its transaction begins, outside it: what the items need that takes
   * no database (signatures), and whatever the group must wait for before its statements run.
   * Groups stay one at a time, so the next one forms meanwhile.
   */
  before?: (items: readonly I[]) => Promise<void>;
}

export class GroupCommit<I, R> {
  private waiting: Waiting<I, R>[] = [];
  private scheduled = false;
  private readonly maxGroup: number;
  private readonly oneStatement: boolean;
  private readonly failed: ((items: readonly I[]) => void) | undefined;
  private readonly before: ((items: readonly I[]) => Promise<void>) | undefined;

  constructor(
    private readonly db: Db,
    private readonly work: GroupWork<I, R>,
    options: GroupCommitOptions<I> = {},
  ) {
    this.maxGroup = options.maxGroup ?? 64;
    this.oneStatement = options.oneStatement ?? false;
    this.failed = options.failed;
    this.before = options.before;
  }

  /** Resolves with the item's result once its group has committed. */
  run(item: I): Promise<R> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ item, resolve, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => void this.drain());
    });
  }

  /** One group's transaction at a time, until none is waiting. */
  private async drain(): Promise<void> {
    while (this.waiting.length > 0) await this.commit(this.waiting.splice(0, this.maxGroup));
    this.scheduled = false;
  }

  private async commit(group: Waiting<I, R>[]): Promise<void> {
    try {
      const results = await this.atomically(group.map((w) => w.item));
      group.forEach((w, i) => w.resolve(results[i]!));
      return;
    } catch (error) {
      this.failed?.(group.map((w) => w.item));
      if (group.length === 1) return group[0]!.reject(error);
    }
    for (const w of group) {
      try {
        w.resolve((await this.atomically([w.item]))[0]!);
      } catch (error) {
        this.failed?.([w.item]);
        w.reject(error);
      }
    }
  }

  private async atomically(items: readonly I[]): Promise<R[]> {
    await this.before?.(items);
    return this.oneStatement ? this.work(this.db, items) : this.db.transaction((tx) => this.work(tx, items));
  }
}
