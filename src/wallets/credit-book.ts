/**
 * Each wallet's available credits as a node that is its ledger's only writer holds them in
 * memory (the embedded store: one process owns its database). Every change that lowers a
 * wallet's balance (a job's reservation, a withdrawal, a dispute's bond) is taken here before its
 * transaction and done after it, so the book can say at once whether a new lock is covered: a
 * lock it grants is one the ledger cannot refuse, and its job may answer its caller before its
 * admission commits, with no stream that breaks off for want of credits later. A withdrawal or a
 * bond, which the ledger would take ahead of locks granted but not yet committed, first waits for
 * those (`takeAlone`), and none is granted while it runs.
 *
 * What the book holds is never above the ledger's figure: a change in flight counts against the
 * wallet until it is done; an increase counts only once committed, and one the book is not told
 * of (a deposit, a refund) only keeps it low until it next learns the exact figure. It learns it
 * from a change's own result when that change was the wallet's only one from start to end here;
 * nothing else could then have moved the balance between the commit and the answer. The ledger
 * stays the authority: a lock the book cannot grant is decided by the admission's commit.
 */

/** A change of a wallet's credits on its way to the ledger. */
export interface CreditChange {
  /** Taken: the book knows the wallet covers it, with every change in flight counted. */
  readonly granted: boolean;
  /** The wallet's credits once this and every change in flight are done; undefined when the book does not know the wallet. */
  readonly creditsAfter: number | undefined;
  /**
   * The change committed (with the wallet's available credits right after it, when its result
   * says), or did not. Called once.
   */
  done(committed: boolean, availableAfter?: number): void;
}

interface Entry {
  /** The ledger's available credits as of the changes done here; undefined until learnt. */
  available: number | undefined;
  /** Credits taken by decreases in flight. */
  claimed: number;
  /** Changes in flight. */
  open: number;
  /** Changes begun, ever: tells a change whether another began while it was in flight. */
  begun: number;
  /** Granted decreases in flight. */
  grantedOpen: number;
  /** Decreases taken alone in flight or waiting: while any is, nothing is granted. */
  alone: number;
  /** Who waits for the granted decreases in flight to be done. */
  waiters: (() => void)[];
}

/** Wallets remembered with nothing in flight; past this, the longest-idle are forgotten. */
const REMEMBERED_WALLETS = 100_000;

export class CreditBook {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly limit = REMEMBERED_WALLETS) {}

  /** A decrease of `credits` about to be committed: granted when the book knows the wallet covers it. */
  take(wallet: string, credits: number): CreditChange {
    const entry = this.entry(wallet);
    const granted = entry.alone === 0 && entry.available !== undefined && entry.available - entry.claimed >= credits;
    entry.claimed += credits;
    return this.begin(wallet, entry, -credits, granted);
  }

  /** A lock the book covers, taken; undefined, with nothing taken, when it cannot grant it. */
  grant(wallet: string, credits: number): CreditChange | undefined {
    const entry = this.entries.get(wallet);
    if (entry === undefined || entry.alone > 0 || entry.available === undefined || entry.available - entry.claimed < credits) return undefined;
    return this.take(wallet, credits);
  }

  /**
   * A decrease the ledger decides alone (a withdrawal, a dispute's bond): once the wallet's
   * granted locks in flight are done, so the ledger cannot give their credits to it; the book
   * grants no lock until it is done.
   */
  async takeAlone(wallet: string, credits: number): Promise<CreditChange> {
    const entry = this.entry(wallet);
    entry.alone++;
    entry.open++;
    while (entry.grantedOpen > 0) await new Promise<void>((resolve) => entry.waiters.push(resolve));
    const change = this.take(wallet, credits);
    entry.open--;
    return {
      ...change,
      done: (committed, availableAfter) => {
        entry.alone--;
        change.done(committed, availableAfter);
      },
    };
  }

  /** An increase of `credits` about to be committed (a charge giving back the rest of its lock). */
  give(wallet: string, credits: number): CreditChange {
    return this.begin(wallet, this.entry(wallet), credits, false);
  }

  /** The credits the book can grant now, undefined when it does not know the wallet. */
  available(wallet: string): number | undefined {
    const entry = this.entries.get(wallet);
    return entry?.available === undefined ? undefined : entry.available - entry.claimed;
  }

  private begin(wallet: string, entry: Entry, change: number, granted: boolean): CreditChange {
    const sole = entry.open === 0;
    entry.open++;
    if (granted) entry.grantedOpen++;
    const begun = ++entry.begun;
    let finished = false;
    return {
      granted,
      creditsAfter: entry.available === undefined ? undefined : entry.available - entry.claimed,
      done: (committed, availableAfter) => {
        if (finished) return;
        finished = true;
        entry.open--;
        if (change < 0) entry.claimed += change;
        if (granted && --entry.grantedOpen === 0) for (const wake of entry.waiters.splice(0)) wake();
        if (committed && sole && entry.begun === begun && availableAfter !== undefined) entry.available = availableAfter;
        else if (committed && entry.available !== undefined) entry.available += change;
        if (entry.open === 0) this.idle(wallet, entry);
      },
    };
  }

  private entry(wallet: string): Entry {
    let entry = this.entries.get(wallet);
    if (entry === undefined) {
      entry = { available: undefined, claimed: 0, open: 0, begun: 0, grantedOpen: 0, alone: 0, waiters: [] };
      this.entries.set(wallet, entry);
    }
    return entry;
  }

  /** An entry with nothing in flight moves to the back of the forgetting order; the oldest idle ones past the limit go. */
  private idle(wallet: string, entry: Entry): void {
    this.entries.delete(wallet);
    this.entries.set(wallet, entry);
    for (const [other, held] of this.entries) {
      if (this.entries.size <= this.limit) break;
      if (held.open === 0 && other !== wallet) this.entries.delete(other);
    }
  }
}
