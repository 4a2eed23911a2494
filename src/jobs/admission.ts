/**
 * Admission: the caller's key confirmed where it came from a cache that may lag, a job's credits
 * reserved, its row, escrow transaction and worker recorded, and its events written, atomically,
 * committed together with the jobs that arrived beside it.
 *
 * A group is all or nothing in the ledger: when a wallet cannot cover its share, the group is
 * rolled back and each job is admitted alone (GroupCommit does that for any failure), so a
 * refused job fails by itself with the error it would have had alone and the others go through.
 */
import { confirmKeys, lockCreditLowSides } from "../accounts/index.ts";
import type { Chain, ChainJournal } from "../chain/index.ts";
import { addEvents, creditLowEvent, jobProcessingEvent, jobSubmittedEvent, type EventsWritten, type NewEvent } from "../events/index.ts";
import { CombinedStatement, GroupCommit, type Db } from "../store/index.ts";
import { jobEventFacts, type JobRecord } from "./job-record.ts";
import type { EscrowTables } from "./escrow-tables.ts";
import { escrowPlace, prepareEscrows, type EscrowAction } from "./job-chain.ts";
import { recordSettlements, type RecordedSettlement } from "./job-ending.ts";
import { addAssignedJobs, type JobChanges } from "./job-repo.ts";
import { traceAdmission } from "./job-spans.ts";
import * as money from "./money.ts";

/** A job to admit: still pending, its worker leased. */
export interface Admission {
  job: JobRecord;
  /** Admitted without its lock, which is signed later with the wallet's next jobs (EscrowTables.lockLater). */
  lockLater?: boolean;
  worker: { address: string; staked: boolean };
  /** The caller's key, accepted from a cache that may lag its revocation (accounts.confirmKeys). */
  keyToConfirm?: string;
  /**
   * Told of the job's escrow lock once its group has signed it (undefined: signed later), before
   * the group's statements: a caller answered before the commit is shown it. Such a lock is the
   * job's only one: were its group to fail, the job is not admitted again alone with another.
   */
  signed?: (lock: EscrowAction | undefined) => void;
  /** The group's statements wait for this (the job's first output relayed): they would hold this thread meanwhile. */
  recordAfter?: Promise<void>;
  /**
   * Its lock was granted by the node's credit book, so the ledger cannot refuse it: it is
   * admitted in groups of such jobs only, which no other job's refusal fails (a failed group is
   * redone job by job, and a lock already shown is not signed again).
   */
  granted?: true;
  /**
   * The job's charge, when its output was in before its group's statements began (set before
   * `recordAfter` resolves): recorded in the same transaction, after the job's row
   * (job-ending.ts chargeAtAdmission). The job is then `settling` once admitted.
   */
  charge?: JobChanges;
}

/**
 * Admits jobs in groups (store/group-commit.ts): one statement per table for a whole group, so
 * under load a job's database work costs a fraction of what admitting it alone does.
 */
export class Admissions {
  private readonly groups: GroupCommit<Admission, Admitted>;
  /** Jobs whose locks the credit book granted (Admission.granted), admitted apart from the others. */
  private readonly grantedGroups: GroupCommit<Admission, Admitted>;
  /** The table locks signed for admissions whose group has not committed yet (escrow tables only). */
  private readonly tableLocks = new Map<Admission, EscrowAction>();
  /** Each admission's lock as its group signed it before its transaction; undefined for one signed later. */
  private readonly locks = new Map<Admission, EscrowAction | undefined>();
  /** Admissions whose lock, signed for a group, was shown to their callers (Admission.signed). */
  private readonly announced = new WeakSet<Admission>();

  /** With `tables`, each job's escrow is a slot of its wallet's escrow table; otherwise a record of its own. */
  constructor(db: Db, chain: Chain, journal: ChainJournal, nodeId: string | undefined, private readonly tables?: EscrowTables) {
    const groups = () =>
      new GroupCommit<Admission, Admitted>(db, async (tx, admissions) => admitAll(tx, admissions, admissions.map((a) => this.locks.get(a)), journal, nodeId), {
        before: (admissions) => this.prepare(db, chain, admissions),
        failed: (admissions) => this.unsigned(admissions),
      });
    this.groups = groups();
    this.grantedGroups = groups();
  }

  /**
   * Before a group's transaction: its locks signed (a table's first lock may take a block of table
   * ids from the database) and shown to the callers who wait for them, then the wait for the jobs
   * whose statements should come after their first output.
   */
  private async prepare(db: Db, chain: Chain, admissions: readonly Admission[]): Promise<void> {
    const locks = await this.signEscrows(db, chain, admissions);
    admissions.forEach((admission, i) => {
      this.locks.set(admission, locks[i]);
      this.announce(admission, locks[i]);
    });
    await Promise.all(admissions.map((a) => a.recordAfter));
  }

  /** Shows a job's lock to its caller (Admission.signed), once: a group signing it again fails. */
  private announce(admission: Admission, lock: EscrowAction | undefined): void {
    if (admission.signed === undefined) return;
    const signedHere = admission.lockLater !== true;
    if (signedHere && this.announced.has(admission)) throw new Error(`job ${admission.job.id}'s escrow lock was shown to its caller from a group that failed; it is not signed again`);
    if (signedHere) this.announced.add(admission);
    admission.signed(lock);
  }

  /**
   * Reserve the job's credits and record it, its escrow transaction and its worker (the job
   * turns `processing`), committed with the rest of its group. Resolves with the wallet's
   * credits available after this job's lock, and the lock; rejects as the ledger refused it.
   */
  async admit(admission: Admission): Promise<Omit<Admitted, "row">> {
    // Committed or not, its table lock is no longer the group's to give back.
    const groups = admission.granted ? this.grantedGroups : this.groups;
    const { row, ...admitted } = await traceAdmission(admission.job, admission.granted === true, () => groups.run(admission)).finally(() => {
      this.tableLocks.delete(admission);
      this.locks.delete(admission);
    });
    Object.assign(admission.job, row);
    return admitted;
  }

  /**
   * Each job's escrow lock, signed together with the group's others, several to a
   * transaction (with escrow tables, a wallet's jobs into the next slots of its table). Signed
   * before the group's transaction; a group that fails is redone job by job, each with a lock of
   * its own, and its table locks give their slots back (`unsigned`).
   */
  private async signEscrows(db: Db, chain: Chain, admissions: readonly Admission[]): Promise<(EscrowAction | undefined)[]> {
    const waiting = admissions.filter((a) => a.lockLater !== true);
    const unsigned = waiting.map(({ job }) => ({ jobId: job.id, tier: job.tier, wallet: job.wallet, credits: job.creditsLocked }));
    let signed: EscrowAction[] = [];
    if (unsigned.length > 0) signed = this.tables ? await this.tables.prepareLocks(db, unsigned) : await prepareEscrows(chain, unsigned);
    if (this.tables) waiting.forEach((admission, i) => this.tableLocks.set(admission, signed[i]!));
    let next = 0;
    return admissions.map((a) => (a.lockLater === true ? undefined : signed[next++]!));
  }

  /** Admissions whose group failed: their table locks will not be sent. */
  private unsigned(admissions: readonly Admission[]): void {
    const locks = admissions.flatMap((admission) => this.tableLocks.get(admission) ?? []);
    for (const admission of admissions) {
      this.tableLocks.delete(admission);
      this.locks.delete(admission);
    }
    if (locks.length > 0) this.tables?.discard(locks);
  }
}

/** A job as its group committed it: its row, its wallet's credits after its lock, and the lock. */
interface Admitted {
  /** As charged, for a job charged with its admission (Admission.charge). */
  row: JobRecord;
  creditsAfterLock: number;
  /** Undefined for a job whose lock is signed later. */
  escrow: EscrowAction | undefined;
  /** For a job charged with its admission: its wallet's credits after the charge. */
  charged?: { creditsRemaining: number };
}

/**
 * Inside `tx`: every job's reservation, row, escrow action and events, in arrival order; the
 * credit.low rule is applied to each job's balance in turn, so the event follows the job.submitted
 * of the job that crossed the threshold, as it would one job at a time.
 *
 * Three statements: the ledger's reservation; the wallets' credit.low flags locked (after the
 * ledger's accounts, the order every transaction touching both takes) with the keys to confirm;
 * and one statement of all the writes that need nothing read back (the rows, the escrow actions,
 * the flags flipped, the events). On PostgreSQL each is a round trip, as are BEGIN and COMMIT,
 * and a caller's first byte waits for all five. Then the charges of the jobs whose output was
 * already in (Admission.charge), as job-ending.ts records any other's.
 */
async function admitAll(tx: Db, admissions: readonly Admission[], escrows: readonly (EscrowAction | undefined)[], journal: ChainJournal, nodeId: string | undefined): Promise<Admitted[]> {
  // A refused key fails the group, which is redone job by job: only its own jobs are refused.
  const keysToConfirm = admissions.flatMap((a) => a.keyToConfirm ?? []);
  const creditsAfter = await reserveAll(tx, admissions, keysToConfirm);
  const sides = await lockCreditLowSides(tx, admissions.map(({ job }) => job.wallet), keysToConfirm);
  admissions.forEach(({ job }, i) => {
    const escrow = escrows[i];
    if (escrow) Object.assign(job, escrowPlace(escrow));
  });
  const writes = new CombinedStatement(tx);
  const rows = addAssignedJobs(
    writes,
    admissions.map(({ job, worker }) => ({ job, worker: { workerAddress: worker.address, workerStaked: worker.staked } })),
    nodeId,
  );
  journal.addRecords(writes, escrows.flatMap((escrow) => escrow ?? []));
  const lows = money.creditLowCrossings(writes, sides, admissions.map(({ job }, i) => ({ wallet: job.wallet, creditsRemaining: creditsAfter[i]!, fell: true })));
  const events: NewEvent[] = admissions.flatMap(({ job }, i) => {
    const low = lows[i];
    const submitted = jobSubmittedEvent({ ...jobEventFacts(job), creditsRemaining: creditsAfter[i]! });
    return [submitted, ...(low ? [creditLowEvent(low)] : []), jobProcessingEvent(jobEventFacts(rows[i]!))];
  });
  const written = addEvents(writes, events);
  written(await writes.run<EventsWritten>(tx));
  const charged = await recordChargesAtAdmission(tx, journal, admissions, rows);
  return rows.map((row, i) => {
    const recorded = charged.get(row.id);
    const admitted = { row: recorded?.job ?? row, creditsAfterLock: creditsAfter[i]!, escrow: escrows[i]! };
    return recorded ? { ...admitted, charged: { creditsRemaining: recorded.creditsRemaining } } : admitted;
  });
}

/** The charges of the jobs whose output was in before the group began (Admission.charge), recorded after their rows, by job id. */
async function recordChargesAtAdmission(tx: Db, journal: ChainJournal, admissions: readonly Admission[], rows: readonly JobRecord[]): Promise<Map<string, RecordedSettlement>> {
  const records = admissions.flatMap(({ charge }, i) => (charge ? [{ job: rows[i]!, changes: charge }] : []));
  if (records.length === 0) return new Map();
  const recorded = await recordSettlements(tx, journal, records);
  return new Map(recorded.map((r) => [r.job.id, r]));
}

/**
 * The group's reservations. A wallet that cannot cover them is refused here, before the keys are
 * confirmed with the credit.low flags, so on that path they are confirmed at once: a revoked
 * key's holder hears that the key is refused (401), not how the wallet stands (402).
 */
async function reserveAll(tx: Db, admissions: readonly Admission[], keysToConfirm: readonly string[]): Promise<number[]> {
  try {
    return await money.reserveAll(tx, admissions.map(({ job }) => ({ wallet: job.wallet, jobId: job.id, credits: job.creditsLocked })));
  } catch (error) {
    if (keysToConfirm.length > 0 && money.isRefusal(error)) await confirmKeys(tx, keysToConfirm);
    throw error;
  }
}
