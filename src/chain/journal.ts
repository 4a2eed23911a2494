/**
 * The chain journal: every transaction the service sends is first a row (`chain_actions`: its
 * signature and signed bytes), written in the database transaction of the change that calls for
 * it, and its outcome is applied in the database transaction that marks the row confirmed, failed
 * or dropped. So a crash at any point leaves a row that `resumeOpen()` finds on the chain and
 * finishes, sends again, or gives up, and no outcome is applied twice.
 *
 * The journal knows an action's kind only as a name: the part that owns what an action does
 * (jobs for escrow, settlement and refund; deposits for funding) registers an `ActionOwner` for
 * its kind, and the journal calls it at each outcome. One journal per service.
 *
 * The table is created by migration `jobs/001_jobs`, which stays in the jobs part because released
 * migrations are never edited. Further changes to it are migrations of the chain part.
 */
import type { Logger } from "../core/index.ts";
import { CombinedStatement, GroupCommit, isAnyOf, isEmbedded, minusMs, returning, spelled, unpadded, type Db, type DbKind } from "../store/index.ts";
import type { Chain, ChainReceipt } from "./chain.ts";
import { joinedSend, tracedSend } from "./send-spans.ts";

const ACTION_TYPES = ["text", "text", "text", "jsonb", "bytea", "text"] as const;
/** The bytes of an action whose shared transaction's row elsewhere keeps them. */
const NO_WIRE = new Uint8Array(0);
/**
 * What a finished action's row keeps of its signed bytes (`alias` names the row): nothing, unless
 * another action of the same shared transaction is still open and borrows them (openRows). Only an
 * open action is ever sent or checked again, and the chain keeps the transaction. A settlement's
 * bytes, about a kilobyte, would otherwise be most of each job's row.
 */
function wireWhenFinished(db: Db | DbKind, alias: string): string {
  return `CASE WHEN EXISTS (SELECT 1 FROM open_chain_actions s WHERE s.signature = ${alias}.signature AND s.subject <> ${alias}.subject)
               THEN ${alias}.wire ELSE ${spelled(db, { postgres: "'\\x'::bytea", sqlite: "x''" })} END`;
}
/** The step of a confirmation's statement that gives the actions it marked confirmed (ActionOwner.addConfirmed reads it). */
const CONFIRMED_STEP = "chain_actions_confirmed";

export interface ChainAction {
  kind: string;
  /** What the action is about, in its owner's words (a job id, a wallet address). */
  subject: string;
  signature: string;
  /** The signed transaction; the rows of a shared one keep it once (addRecords). */
  wire: Uint8Array;
  /** What rebuilding the transaction needs beyond what its owner keeps (a deposit's credits). */
  params?: Record<string, number>;
  /**
   * The owner's record of the subject as the sender holds it, handed back to the owner with the
   * confirmation so that it need not read it again. Never kept in the journal's row: an action
   * taken up by recovery, or rebuilt, has none, and its owner reads the subject.
   */
  subjectRecord?: unknown;
  /**
   * Its transaction carries other actions too (several jobs' escrow locks), each with a row of its
   * own under the same signature; their sends share one trip to the chain. The chain refusing it
   * may be another's doing, so a refused one is sent again alone (ActionOwner.alone). Not kept in
   * the row: recovery finishes a shared action as any other.
   */
  shared?: boolean;
}

export type ActionState = "sent" | "confirmed" | "failed" | "dropped";

/** What the owner of a kind of action does at each of its outcomes. */
export interface ActionOwner {
  /** In the transaction marking it confirmed. What it returns reaches the `send` that applied it. */
  confirmed(tx: Db, action: ChainAction, slot: number): Promise<unknown>;
  /** The chain executed it and refused it; in the transaction marking it failed. */
  rejected(tx: Db, action: ChainAction, reason: string): Promise<void>;
  /**
   * It never reached the chain and can no longer land: a fresh copy to send in its place, or
   * undefined to give it up. Called outside any transaction (building and signing take time).
   */
  rebuild(action: ChainAction): Promise<ChainAction | undefined>;
  /** In the transaction marking it dropped (or failed: a shared one sent again alone), which also records `fresh` when there is one. */
  dropped(tx: Db, action: ChainAction, fresh: ChainAction | undefined): Promise<void>;
  /**
   * For an action whose shared transaction (ChainAction.shared) the chain refused: a copy of it
   * alone, built and signed outside any transaction, sent in its place; `dropped` is then called
   * with the copy, in the transaction marking the shared one failed. Without it, a refused shared
   * action is refused as any other.
   */
  alone?(action: ChainAction): Promise<ChainAction>;
  /** At start-up, one that the chain never saw is given up (dropped without a copy) instead of sent again. */
  giveUpUnsentOnResume?: boolean;
  /**
   * Several confirmations of its kind at once, in the transaction marking them confirmed, with
   * one result per action; all or nothing (an error undoes the whole group, whose actions are
   * then confirmed one by one through `confirmed`).
   */
  confirmedAll?(tx: Db, confirmed: readonly { action: ChainAction; slot: number }[]): Promise<unknown[]>;
  /**
   * What its confirmation does, when that is only writes (no outcome to return, nothing to read
   * first): steps added to the journal's statement marking the actions confirmed, where the step
   * named `confirmed` gives each action it marked just now (signature, subject, slot). Those
   * confirmations are then that one statement, atomic by itself, in groups, with no transaction
   * around it. `confirmed` and `confirmedAll` still serve recovery.
   */
  addConfirmed?(statement: CombinedStatement, confirmed: string): void;
  /**
   * Its confirmations may share a transaction with others on PostgreSQL: any row they lock that
   * another node's group may lock too (a shared account) they lock in one statement, in one
   * global order, so two nodes' groups cannot deadlock. On PGlite, one connection, every kind is
   * grouped.
   */
  confirmsInGroups?: boolean;
}

/** The chain refused the transaction itself (as opposed to the chain being unreachable). */
export class ChainRejectedError extends Error {
  override readonly name = "ChainRejectedError";
  constructor(readonly signature: string, readonly reason: string) {
    super(`transaction ${signature} was rejected on-chain: ${reason}`);
  }
}

export interface SentAction {
  slot: number;
  /** What the owner's `confirmed` returned, when this call applied the confirmation (not a concurrent recovery). */
  outcome?: unknown;
}

/** Whose open actions `resumeOpen` finishes: one node's, and with `orUnowned` those recorded before nodes were named. */
export interface ActionOwnerNode {
  nodeId: string;
  orUnowned: boolean;
}

interface OpenRow {
  signature: string;
  kind: string;
  subject: string;
  params: Record<string, number>;
  wire: Uint8Array;
}

/** How one send of an action ended: on the chain, executed and refused, or unable to land (its blockhash expired). */
export type SendOutcome = "landed" | "refused" | "not_landed";

export class ChainJournal {
  /** Told how each send of this process ended, by the action's kind (the metrics' counts). */
  onSent: ((kind: string, outcome: SendOutcome) => void) | undefined;
  /** Told the fee, in lamports, of each transaction this process's sends put on the chain (refused ones pay theirs too). */
  onFee: ((kind: string, lamports: bigint) => void) | undefined;
  private readonly owners = new Map<string, ActionOwner>();
  /** Actions (actionKey) a `send` in this process is waiting on. */
  private readonly sending = new Set<string>();
  /** The sends of shared transactions under way, by signature: one trip to the chain for all their actions. */
  private readonly sharedSends = new Map<string, Promise<ChainReceipt>>();
  /** Confirmations are applied in groups: one transaction for those that land together. */
  private readonly confirmations: GroupCommit<{ action: ChainAction; slot: number }, { outcome?: unknown }>;
  private readonly writeOnlyGroups = new Map<string, GroupCommit<{ action: ChainAction; slot: number }, { outcome?: unknown }>>();

  constructor(
    private readonly db: Db,
    private readonly chain: Chain,
    private readonly logger: Logger,
    /** The gateway node recording actions here (chain_actions.node_id); undefined: none named. */
    private readonly nodeId?: string,
  ) {
    this.confirmations = new GroupCommit(db, (tx, confirmed) => this.applyConfirmed(tx, confirmed));
  }

  /** Name the owner of a kind of action; each kind has one. */
  register(kind: string, owner: ActionOwner): void {
    if (this.owners.has(kind)) throw new Error(`chain actions of kind ${kind} already have an owner`);
    this.owners.set(kind, owner);
  }

  private ownerOf(action: ChainAction): ActionOwner {
    const owner = this.owners.get(action.kind);
    if (!owner) throw new Error(`no owner is registered for chain actions of kind ${action.kind}`);
    return owner;
  }

  /** Write the intent row, in the caller's transaction `db`, before the action is sent. */
  async record(db: Db, action: ChainAction): Promise<void> {
    await this.recordAll(db, [action]);
  }

  /** `record` for several actions in one statement. */
  async recordAll(db: Db, actions: readonly ChainAction[]): Promise<void> {
    const statement = new CombinedStatement(db);
    this.addRecords(statement, actions);
    await statement.run(db);
  }

  /** `recordAll` as a step of `statement`, which the caller runs in its transaction. */
  addRecords(statement: CombinedStatement, actions: readonly ChainAction[]): void {
    if (actions.length === 0) return;
    // A shared transaction's bytes are kept once, in the row of its first action here (openRows finds them).
    const kept = new Set<string>();
    const wireOf = (action: ChainAction) => (kept.has(action.signature) ? NO_WIRE : (kept.add(action.signature), action.wire));
    const values = statement.values(
      ACTION_TYPES,
      actions.map((action) => [action.signature, action.kind, action.subject, JSON.stringify(action.params ?? {}), wireOf(action), this.nodeId ?? null]),
    );
    statement.step("chain_actions_recorded", `INSERT INTO chain_actions (signature, kind, subject, params, wire, node_id) ${unpadded(values)} RETURNING signature, subject`, ["signature", "subject"]);
    statement.step("open_chain_actions_recorded", "INSERT INTO open_chain_actions (signature, subject) SELECT signature, subject FROM chain_actions_recorded");
  }

  /**
   * Send a recorded action and apply its outcome. Resolves once confirmed; rejects with
   * ChainRejectedError (after applying the failure) when the chain executes and refuses it. One
   * that could not land at all (its blockhash expired) is replaced by its owner's fresh copy, at
   * most `rebuilds` times, or given up when the owner has none.
   */
  async send(action: ChainAction, rebuilds = 1): Promise<SentAction> {
    this.sending.add(actionKey(action));
    try {
      return await this.sendAndApply(action, rebuilds);
    } finally {
      this.sending.delete(actionKey(action));
    }
  }

  private async sendAndApply(action: ChainAction, rebuilds: number): Promise<SentAction> {
    const sent = await this.sendOnce(action);
    if ("slot" in sent) return { slot: sent.slot, ...(await this.confirmed(action, sent.slot)) };
    if (sent.fresh === undefined || (rebuilds === 0 && !sent.alone)) throw sent.error;
    return this.send(sent.fresh, sent.alone ? rebuilds : rebuilds - 1);
  }

  /**
   * One send: the slot it landed in; or, when it could not land at all, the owner's fresh copy
   * recorded in its place (undefined: none) with the chain's error; or, when the chain refused
   * its shared transaction, its copy alone recorded in its place (`alone`). Throws, after
   * applying the failure, when the chain executed and refused it.
   */
  private async sendOnce(action: ChainAction): Promise<{ slot: number } | { fresh: ChainAction | undefined; error: unknown; alone?: boolean }> {
    try {
      const { slot } = await this.sendWire(action);
      this.onSent?.(action.kind, "landed");
      return { slot };
    } catch (error) {
      if (!this.chain.isRejection(error)) throw error;
      this.onSent?.(action.kind, error.details.landed ? "refused" : "not_landed");
      if (error.details.landed) {
        if (action.shared === true && this.ownerOf(action).alone) return { fresh: await this.replaceAlone(action, error.details.err), error, alone: true };
        await this.rejected(action, error.details.err);
        throw new ChainRejectedError(action.signature, error.details.err);
      }
      return { fresh: await this.replace(action), error };
    }
  }

  /** The chain's trip for `action`: shared with the other actions of its transaction (ChainAction.shared). */
  private sendWire(action: ChainAction): Promise<ChainReceipt> {
    if (action.shared !== true) return this.trip(action);
    let sending = this.sharedSends.get(action.signature);
    if (!sending) {
      sending = this.trip(action);
      this.sharedSends.set(action.signature, sending);
      // A later send of the same bytes is still safe: the chain answers it from the first (Chain.send).
      const forget = () => this.sharedSends.delete(action.signature);
      sending.then(forget, forget);
    } else joinedSend(action);
    return sending;
  }

  /** One trip of the action's bytes to the chain; its fee is counted once, when this trip is the one that executed them. */
  private trip(action: ChainAction): Promise<ChainReceipt> {
    const sending = tracedSend(action, () => this.chain.send(action.wire), (error) => (this.chain.isRejection(error) ? (error.details.landed ? "refused" : "not_landed") : "unreachable"));
    if (this.onFee) this.countFee(action, sending);
    return sending;
  }

  private countFee(action: ChainAction, sending: Promise<ChainReceipt>): void {
    sending
      .then((receipt) => !receipt.alreadyProcessed, (error: unknown) => this.chain.isRejection(error) && error.details.landed)
      .then((executed) => (executed ? this.chain.feePaid(action.signature, action.wire) : undefined))
      .then(
        (lamports) => lamports !== undefined && this.onFee?.(action.kind, lamports),
        (error: unknown) => this.logger.warn({ err: error, signature: action.signature }, "could not read a landed transaction's fee; the fees metric misses it"),
      );
  }

  /**
   * A shared transaction was refused: this action's copy alone (ActionOwner.alone) recorded in
   * its place, the shared one's row marked failed. Undefined when the row was no longer open.
   */
  private async replaceAlone(action: ChainAction, reason: string): Promise<ChainAction | undefined> {
    this.logger.warn({ signature: action.signature, kind: action.kind, subject: action.subject, reason }, "shared chain transaction rejected; sending its part alone");
    const alone = await this.ownerOf(action).alone!(action);
    return (await this.dropAndRecord(action, alone, { state: "failed", error: reason })) ? alone : undefined;
  }

  /**
   * `send` up to the landing, for an action whose owner's confirmation only writes
   * (ActionOwner.addConfirmed) and whose sender may write it in a statement of its own: resolves
   * with the slot once the chain has the action (and the action that landed: its copy alone, when
   * its shared transaction was refused), and leaves the confirmation to the caller, who
   * then calls `confirm`, or runs `addConfirmed`'s step and calls `released`. Until one of those,
   * `resumeStale` leaves the action alone. One that could not land is not sent again here.
   */
  async sendUntilLanded(action: ChainAction): Promise<{ action: ChainAction; slot: number }> {
    if (!this.ownerOf(action).addConfirmed) throw new Error(`chain actions of kind ${action.kind} are not confirmed by writes alone`);
    this.sending.add(actionKey(action));
    try {
      const sent = await this.sendOnce(action);
      if ("slot" in sent) return { action, slot: sent.slot };
      if (!sent.alone || sent.fresh === undefined) throw sent.error;
      this.sending.delete(actionKey(action));
      return await this.sendUntilLanded(sent.fresh);
    } catch (error) {
      this.sending.delete(actionKey(action));
      throw error;
    }
  }

  /** The confirmation of an action `sendUntilLanded` landed, written as `send` writes it. */
  async confirm(action: ChainAction, slot: number): Promise<SentAction> {
    try {
      return { slot, ...(await this.confirmed(action, slot)) };
    } finally {
      this.sending.delete(actionKey(action));
    }
  }

  /**
   * `sendUntilLanded`'s confirmations as a step of the caller's `statement`: the actions marked
   * confirmed. The owner's own writes (the job's slot, for an escrow) are the caller's to make in
   * the same statement.
   */
  addConfirmed(statement: CombinedStatement, confirmed: readonly { action: ChainAction; slot: number }[]): void {
    if (confirmed.length > 0) this.addMarks(statement, confirmed);
  }

  /** The caller's statement with `addConfirmed`'s step has committed, or failed and the action was confirmed otherwise. */
  released(action: ChainAction): void {
    this.sending.delete(actionKey(action));
  }

  private confirmed(action: ChainAction, slot: number): Promise<{ outcome?: unknown }> {
    const owner = this.ownerOf(action);
    if (owner.addConfirmed) return this.writeOnlyConfirmations(action.kind, owner).run({ action, slot });
    if (isEmbedded(this.db) || owner.confirmsInGroups === true) return this.confirmations.run({ action, slot });
    return this.db.transaction(async (tx) => (await this.applyConfirmed(tx, [{ action, slot }]))[0]!);
  }

  /** The groups of confirmations of a kind whose owner adds only writes: one statement each (ActionOwner.addConfirmed). */
  private writeOnlyConfirmations(kind: string, owner: ActionOwner): GroupCommit<{ action: ChainAction; slot: number }, { outcome?: unknown }> {
    let groups = this.writeOnlyGroups.get(kind);
    if (!groups) {
      groups = new GroupCommit(this.db, async (db, confirmed) => {
        const statement = new CombinedStatement(db);
        this.addMarks(statement, confirmed);
        owner.addConfirmed!(statement, CONFIRMED_STEP);
        await statement.run(db);
        return confirmed.map(() => ({}));
      }, { oneStatement: true });
      this.writeOnlyGroups.set(kind, groups);
    }
    return groups;
  }

  /** The step (CONFIRMED_STEP) marking `confirmed` actions confirmed, giving each one it marked (one another confirmed first is left alone). */
  private addMarks(statement: CombinedStatement, confirmed: readonly { action: ChainAction; slot: number }[]): void {
    const marks = statement.table(["text", "text", "bigint"], confirmed.map(({ action, slot }) => [action.signature, action.subject, slot]), "c", ["signature", "subject", "slot"]);
    statement.step(
      CONFIRMED_STEP,
      `UPDATE chain_actions AS a SET state = 'confirmed', slot = c.slot, updated_at = now(), wire = ${wireWhenFinished(this.db, "a")}
         FROM ${marks}
        WHERE a.signature = c.signature AND a.subject = c.subject AND a.state = 'sent' ${returning(this.db, "a", ["signature", "subject", "slot"])}`,
      ["signature", "subject", "slot"],
    );
    statement.step("open_chain_actions_confirmed", `DELETE FROM open_chain_actions WHERE (signature, subject) IN (SELECT signature, subject FROM ${CONFIRMED_STEP})`);
  }

  /** Inside `tx`: marks the actions confirmed, in one statement, and hands them to their owners, kind by kind. */
  private async applyConfirmed(tx: Db, confirmed: readonly { action: ChainAction; slot: number }[]): Promise<{ outcome?: unknown }[]> {
    const marking = new CombinedStatement(tx);
    this.addMarks(marking, confirmed);
    marking.returns(`SELECT signature, subject FROM ${CONFIRMED_STEP}`);
    const marked = await marking.run<{ signature: string; subject: string }>(tx);
    // One already confirmed by a concurrent recovery (or earlier in this group) has its outcome applied: not twice.
    const open = new Set(marked.map(actionKey));
    const byKind = new Map<string, number[]>();
    confirmed.forEach(({ action }, i) => {
      if (open.delete(actionKey(action))) byKind.set(action.kind, [...(byKind.get(action.kind) ?? []), i]);
    });
    const outcomes: { outcome?: unknown }[] = confirmed.map(() => ({}));
    for (const [kind, indexes] of byKind) {
      const owner = this.ownerOf(confirmed[indexes[0]!]!.action);
      const items = indexes.map((i) => confirmed[i]!);
      const results = owner.confirmedAll && items.length > 1 ? await owner.confirmedAll(tx, items) : await eachConfirmed(tx, owner, items);
      if (results.length !== items.length) throw new Error(`the owner of ${kind} actions answered ${results.length} confirmations of ${items.length}`);
      indexes.forEach((i, k) => (outcomes[i] = { outcome: results[k] }));
    }
    return outcomes;
  }

  private async rejected(action: ChainAction, reason: string): Promise<void> {
    this.logger.warn({ signature: action.signature, kind: action.kind, subject: action.subject, reason }, "chain transaction rejected");
    await this.db.transaction(async (tx) => {
      if (await this.mark(tx, action, "failed", { error: reason })) await this.ownerOf(action).rejected(tx, action, reason);
    });
  }

  /** Retire an action that never reached the chain, recording the owner's fresh copy if it has one. */
  private async replace(action: ChainAction): Promise<ChainAction | undefined> {
    const fresh = await this.ownerOf(action).rebuild(action);
    await this.dropAndRecord(action, fresh);
    return fresh;
  }

  /** Retire an open action (dropped, unless told it failed), recording `fresh` in its place; false when it was not open. */
  private async dropAndRecord(action: ChainAction, fresh: ChainAction | undefined, end: { state: "dropped" | "failed"; error?: string } = { state: "dropped" }): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      if (!(await this.mark(tx, action, end.state, { error: end.error }))) return false;
      if (fresh) await this.record(tx, fresh);
      await this.ownerOf(action).dropped(tx, action, fresh);
      return true;
    });
  }

  /** Move an open row to `state`; false when it was not open any more (someone else finished it). */
  private async mark(tx: Db, action: ChainAction, state: Exclude<ActionState, "sent">, details: { slot?: number; error?: string | undefined }): Promise<boolean> {
    const statement = new CombinedStatement(tx);
    const [signature, subject] = [statement.param(action.signature, "text"), statement.param(action.subject, "text")];
    const [newState, slot, error] = [statement.param(state, "text"), statement.param(details.slot ?? null, "bigint"), statement.param(details.error ?? null, "text")];
    statement.step(
      "marked",
      `UPDATE chain_actions AS a SET state = ${newState}, slot = coalesce(${slot}, slot), error = coalesce(${error}, error), updated_at = now(), wire = ${wireWhenFinished(tx, "a")}
        WHERE signature = ${signature} AND subject = ${subject} AND state = 'sent' RETURNING signature, subject`,
      ["signature", "subject"],
    );
    statement.step("closed", "DELETE FROM open_chain_actions WHERE (signature, subject) IN (SELECT signature, subject FROM marked)");
    statement.returns("SELECT signature FROM marked");
    return (await statement.run(tx)).length > 0;
  }

  /**
   * For an action someone else sends (a wallet paying a Solana Pay transaction request, which it
   * signs and submits itself): applies what the chain did with it, if anything yet. Given up once
   * its blockhash has expired unseen, since it can no longer land. Returns the row's state.
   */
  async observe(action: ChainAction, lastValidBlockHeight: number): Promise<ActionState> {
    const status = await this.chain.transactionStatus(action.signature);
    if (status?.ok) await this.confirmed(action, status.slot);
    else if (status) await this.rejected(action, status.err ?? "failed on-chain");
    else if ((await this.chain.blockHeight()) > lastValidBlockHeight) await this.dropAndRecord(action, undefined);
    const [row] = await this.db.query<{ state: ActionState }>("SELECT state FROM chain_actions WHERE signature = $1 AND subject = $2", [action.signature, action.subject]);
    return row?.state ?? "dropped";
  }

  /**
   * Finish every action left open by a crash (of `owner`'s node; of any node when not given):
   * apply what the chain did, or send it (or give it up). Returns how many were open.
   */
  async resumeOpen(owner?: ActionOwnerNode): Promise<number> {
    const open = await this.openRows(owner, 0);
    for (const row of open) await this.finishOpen(row);
    return open.length;
  }

  /**
   * While the node runs: finish its actions that have stayed open longer than `olderThanMs` and
   * that no send in this process is waiting on (one whose confirmation failed, the chain being
   * unreachable then), as recovery at start would. Returns how many it took up.
   */
  async resumeStale(owner: ActionOwnerNode, olderThanMs: number): Promise<number> {
    const stale = (await this.openRows(owner, olderThanMs)).filter((row) => !this.sending.has(actionKey(row)));
    for (const row of stale) await this.finishOpen(row);
    return stale.length;
  }

  private openRows(owner: ActionOwnerNode | undefined, olderThanMs: number): Promise<OpenRow[]> {
    return this.db.query<OpenRow>(
      `SELECT signature, kind, subject, params,
              CASE WHEN length(wire) > 0 THEN wire
                   ELSE (SELECT s.wire FROM chain_actions s WHERE s.signature = a.signature AND length(s.wire) > 0 LIMIT 1) END AS wire
         FROM open_chain_actions o JOIN chain_actions a USING (signature, subject)
        WHERE a.state = 'sent' AND ($1::text IS NULL OR node_id = $1 OR ($2 AND node_id IS NULL))
          AND created_at <= ${minusMs(this.db, "now()", "$3")}
        ORDER BY created_at`,
      [owner?.nodeId ?? null, owner?.orUnowned ?? false, olderThanMs],
    );
  }

  private async finishOpen(row: OpenRow): Promise<void> {
    const action: ChainAction = { kind: row.kind, subject: row.subject, signature: row.signature, wire: new Uint8Array(row.wire), params: row.params };
    // One that is to be given up if unsent must first be past landing: a cluster may still execute a copy.
    const giveUp = this.ownerOf(action).giveUpUnsentOnResume === true;
    const status = giveUp ? await this.chain.settledStatus(action.wire) : await this.chain.transactionStatus(action.signature);
    if (status?.ok) {
      await this.confirmed(action, status.slot);
    } else if (status) {
      await this.rejected(action, status.err ?? "failed on-chain");
    } else if (giveUp) {
      await this.dropAndRecord(action, undefined);
    } else {
      await this.send(action).catch((error: unknown) => {
        this.logger.error({ err: error, subject: action.subject, kind: action.kind }, "could not finish a chain action during recovery");
      });
    }
  }

  /** Whether any action of `kind` about `subject` was ever recorded. */
  async hasAction(kind: string, subject: string): Promise<boolean> {
    const rows = await this.db.query("SELECT 1 FROM chain_actions WHERE kind = $1 AND subject = $2 LIMIT 1", [kind, subject]);
    return rows.length > 0;
  }

  /** The actions recorded about these subjects, oldest first. */
  async actionsAbout(subjects: readonly string[]): Promise<{ subject: string; kind: string; signature: string; state: ActionState }[]> {
    if (subjects.length === 0) return [];
    return this.db.query(`SELECT subject, kind, signature, state FROM chain_actions WHERE ${isAnyOf(this.db, "subject", "$1::text[]")} ORDER BY created_at`, [[...subjects]]);
  }
}

/** An action's row: its signature, and its subject among the actions sharing the transaction. */
function actionKey(action: { signature: string; subject: string }): string {
  return `${action.signature} ${action.subject}`;
}

async function eachConfirmed(tx: Db, owner: ActionOwner, items: readonly { action: ChainAction; slot: number }[]): Promise<unknown[]> {
  const results: unknown[] = [];
  for (const { action, slot } of items) results.push(await owner.confirmed(tx, action, slot));
  return results;
}
