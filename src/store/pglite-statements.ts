/**
 * Named prepared statements for PGlite. `PGlite.query` parses, plans and describes every statement
 * again, over six protocol exchanges with the WebAssembly module; here a statement text is parsed
 * and described once, then each run is one exchange (bind, execute, sync) against the plan
 * PostgreSQL keeps for it. The rows' columns are the statement's description's: describing each
 * run's portal again cost 4-11% of a statement returning rows (a throwaway script, 3,000 runs of a
 * statement each way, medians of 12 rounds alternated). Values are serialized and results parsed
 * exactly as `PGlite.query` does, with the instance's own serializers and parsers.
 *
 * A statement inside a transaction runs on the connection the caller's transaction holds; every
 * run takes PGlite's query lock, as its own transaction handle does.
 */
import { type PGlite, parse, protocol, types } from "@electric-sql/pglite";

type BackendMessage = Awaited<ReturnType<PGlite["execProtocol"]>>["messages"][number];

const { serialize } = protocol;

interface Prepared {
  name: string;
  /** Parameter type OIDs, as PostgreSQL inferred them. */
  parameterTypes: number[];
  /** The rows' columns, as the statement's description gave them; none for a statement without rows. */
  rowDescription: BackendMessage[];
}

/** Distinct statement texts kept prepared; past this, texts run through `PGlite.query` (multi-row VALUES lists vary in length). */
const MAX_PREPARED = 1_000;

/** Execute (the unnamed portal, every row) and Sync: the same bytes after every Bind. */
const EXECUTE_AND_SYNC = Buffer.concat([serialize.execute({}), serialize.sync()]);

/**
 * The bytes of `serialize.bind({ statement, values })` followed by EXECUTE_AND_SYNC, sized first
 * and written once: PGlite's writer grows a buffer value by value and then copies it, which costs
 * a loaded node a few percent of its main thread, most of it for the long VALUES lists of grouped
 * statements. The layout is PostgreSQL's Bind message: portal and statement names, a text format
 * code per parameter, each value's length (-1 for NULL) and bytes, and no result format codes
 * (all text).
 */
export function bindExecuteSync(statement: string, values: readonly (string | null)[]): Buffer {
  const lengths = values.map((value) => (value === null ? -1 : Buffer.byteLength(value)));
  let size = 4 + 1 + Buffer.byteLength(statement) + 1 + 2 + 2 * values.length + 2 + 2;
  for (const length of lengths) size += 4 + Math.max(length, 0);
  const out = Buffer.allocUnsafe(1 + size + EXECUTE_AND_SYNC.length);
  out[0] = 0x42; // 'B'
  let at = out.writeInt32BE(size, 1);
  out[at++] = 0; // the unnamed portal
  at += out.write(statement, at);
  out[at++] = 0;
  at = out.writeUInt16BE(values.length, at);
  out.fill(0, at, at + 2 * values.length); // each parameter's format: text
  at = out.writeUInt16BE(values.length, at + 2 * values.length);
  values.forEach((value, i) => {
    at = out.writeInt32BE(lengths[i]!, at);
    if (value !== null) at += out.write(value, at);
  });
  at = out.writeInt16BE(0, at);
  EXECUTE_AND_SYNC.copy(out, at);
  return out;
}

export class PreparedStatements {
  private readonly prepared = new Map<string, Prepared>();
  /** Names are never reused: a statement PostgreSQL kept must not collide with a later one. */
  private named = 0;

  constructor(private readonly pg: PGlite) {}

  /**
   * Rows of `sql` run with `params`, or undefined when the text is not kept prepared: inside the
   * caller's transaction, or (`alone`) as a statement of its own, waiting like `PGlite.query` for
   * any open transaction to end (PGlite's lock between the two; the method is public though named
   * as internal, in the version this project pins).
   */
  async query<T>(sql: string, params: readonly unknown[] = [], alone = false): Promise<T[] | undefined> {
    if (!alone) return this.run<T>(sql, params, false);
    return this.pg._runExclusiveTransaction(() => this.run<T>(sql, params, true));
  }

  private async run<T>(sql: string, params: readonly unknown[], syncToFs: boolean): Promise<T[] | undefined> {
    const statement = this.prepared.get(sql) ?? (this.prepared.size < MAX_PREPARED ? await this.prepare(sql) : undefined);
    if (statement === undefined) return undefined;
    const values = params.map((value, i) => this.serialized(value, statement.parameterTypes[i]!));
    const message = bindExecuteSync(statement.name, values);
    const { messages } = await this.pg.runExclusive(() => this.pg.execProtocol(message, { syncToFs }));
    return parse.parseResults([...statement.rowDescription, ...messages], this.pg.parsers)[0]?.rows as T[];
  }

  private async prepare(sql: string): Promise<Prepared> {
    const name = `svc_${++this.named}`;
    const message = Buffer.concat([serialize.parse({ name, text: sql }), serialize.describe({ type: "S", name }), serialize.sync()]);
    const { messages } = await this.pg.runExclusive(() => this.pg.execProtocol(message, { syncToFs: false }));
    const prepared = {
      name,
      parameterTypes: parse.parseDescribeStatementResults(messages),
      rowDescription: messages.filter((m) => m.name === "rowDescription"),
    };
    this.prepared.set(sql, prepared);
    return prepared;
  }

  private serialized(value: unknown, type: number): string | null {
    if (value === null || value === undefined) return null;
    // PGlite's own bytea serializer formats each byte in JavaScript: with a chain transaction's
    // wire (hundreds of bytes) in every escrow and settlement record, that is a few percent of a
    // loaded node's main thread. Node's hex encoder gives the same text.
    if (type === types.BYTEA && value instanceof Uint8Array) return `\\x${Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString("hex")}`;
    const serializer = this.pg.serializers[type];
    return serializer ? serializer(value) : String(value);
  }
}
