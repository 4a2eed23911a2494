/**
 * Writing an event: one statement that inserts the envelope into the outbox and fans it out to
 * a delivery row for each of the account's webhooks subscribed to its name. An event no webhook
 * subscribes to is not written: the outbox holds what will be delivered, the service has no other
 * event channel, and a job's three events would be a fifth of its write-ahead log. Called with
 * the transaction handle of the change that causes the event, so the event exists exactly when
 * the change does. Delivery loops in this process are woken; they cannot see the row before the
 * caller commits, so they look again until it shows up (see delivery.ts).
 */
import { newId } from "../core/index.ts";
import { CombinedStatement, isAnyOf, unpadded, type Db } from "../store/index.ts";
import { API_VERSION, type EventName } from "./names.ts";

export interface Envelope<D = Record<string, unknown>> {
  id: string;
  event: EventName;
  created_at: string;
  api_version: string;
  data: D;
}

export interface NewEvent {
  /** The wallet address the event belongs to; only its webhooks receive it. */
  account: string;
  name: EventName;
  data: Record<string, unknown>;
  /** Names the change; a second event with the same key is not written. */
  dedupeKey?: string;
}

export function envelope(id: string, name: EventName, createdAt: Date, data: Record<string, unknown>): Envelope {
  return { id, event: name, created_at: createdAt.toISOString(), api_version: API_VERSION, data };
}

/** Called with the new event's id, or with none when committed work became due (a replay). */
type Waker = (eventId?: string) => void;
const wakers = new Set<Waker>();

/** Delivery loops subscribe here to hear of new work written by this process. */
export function onEventWritten(waker: Waker): () => void {
  wakers.add(waker);
  return () => wakers.delete(waker);
}

/** Tells this process's delivery loops to look now; call after committing. */
export function wakeDelivery(): void {
  for (const wake of wakers) wake();
}

/**
 * Writes the event inside `tx`. Returns its id, or undefined when no webhook of its account
 * subscribes to it or `dedupeKey` says it was already written.
 */
export async function emitEvent(tx: Db, event: NewEvent): Promise<string | undefined> {
  return (await emitEvents(tx, [event]))[0];
}

const EVENT_TYPES = ["text", "text", "text", "text", "timestamptz", "text"] as const;

/**
 * Writes several events inside `tx` in one statement, in order (their ids sort as given). Returns
 * each one's id, or undefined where none subscribes to it or its `dedupeKey` says it was already
 * written.
 */
export async function emitEvents(tx: Db, events: readonly NewEvent[]): Promise<(string | undefined)[]> {
  const statement = new CombinedStatement(tx);
  const written = addEvents(statement, events);
  return written(await statement.run(tx));
}

/** What a statement carrying events returns: each event written, and how many deliveries it fanned out to. */
export interface EventsWritten {
  id: string;
  fanned_out: bigint;
}

/**
 * `emitEvents` as steps of `statement`, whose result they give; the caller runs it in its
 * transaction and hands its rows to the function returned, which answers as `emitEvents` does.
 */
export function addEvents(statement: CombinedStatement, events: readonly NewEvent[]): (rows: readonly EventsWritten[]) => (string | undefined)[] {
  if (events.length === 0) return () => [];
  const ids: string[] = [];
  const rows = events.map((event) => {
    const id = newId("evt");
    const createdAt = new Date();
    ids.push(id);
    return [id, event.account, event.name, event.dedupeKey ?? null, createdAt, JSON.stringify(envelope(id, event.name, createdAt, event.data))];
  });
  statement.step(
    "events_written",
    `INSERT INTO events (id, account, name, dedupe_key, created_at, body)
     ${unpadded(statement.values(EVENT_TYPES, rows), `EXISTS (SELECT 1 FROM webhooks w WHERE w.wallet = padded.column2 AND ${isAnyOf(statement.kind, "padded.column3", "w.events")})`)}
     ON CONFLICT (dedupe_key) DO NOTHING
     RETURNING id, account, name`,
    ["id", "account", "name"],
  );
  statement.step(
    "events_fanned_out",
    `INSERT INTO webhook_deliveries (webhook_id, event_id)
     SELECT w.id, e.id FROM events_written e JOIN webhooks w ON w.wallet = e.account AND ${isAnyOf(statement.kind, "e.name", "w.events")}
     RETURNING event_id`,
    ["event_id"],
  );
  statement.returns("SELECT e.id, (SELECT count(*) FROM events_fanned_out d WHERE d.event_id = e.id) AS fanned_out FROM events_written e");
  return (result) => {
    const written = new Map(result.map((row) => [row.id, row.fanned_out]));
    for (const [id, fannedOut] of written) if (fannedOut > 0n) for (const wake of wakers) wake(id);
    return ids.map((id) => (written.has(id) ? id : undefined));
  };
}
