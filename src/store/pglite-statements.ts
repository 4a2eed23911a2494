/**
 * Named prepared statements for PGlite. `PGlite.query` parses, plans and describes every statement
 * again, over six protocol exchanges with the WebAssembly module; here a statement text is parsed
 * and described once, then each run is one exchange (bind, describe the portal, execute, sync)
 * against the plan PostgreSQL keeps for it. Values are serialized and results parsed exactly as
 * `PGlite.query` does, with the instance's own serializers and parsers.
 *
 * Callers must hold PGlite's transaction (the statements run on its one connection); runs take its
 * query lock, as `PGlite`'s own transaction handle does.
 */
import { type PGlite, parse, protocol } from "@electric-sql/pglite";

const { serialize } = protocol;

interface Prepared {
  name: string;
  /** Parameter type OIDs, as PostgreSQL inferred them. */
  parameterTypes: number[];
}

/** Distinct statement texts kept prepared; past this, texts run through `PGlite.query` (multi-row VALUES lists vary in length). */
const MAX_PREPARED = 1_000;

export class PreparedStatements {
  private readonly prepared = new Map<string, Prepared>();
  /** Names are never reused: a statement PostgreSQL kept must not collide with a later one. */
  private named = 0;

  constructor(private readonly pg: PGlite) {}

  /** Rows of `sql` run with `params`, inside the caller's transaction. */
  async query<T>(sql: string, params: readonly unknown[] = []): Promise<T[] | undefined> {
    const statement = this.prepared.get(sql) ?? (this.prepared.size < MAX_PREPARED ? await this.prepare(sql) : undefined);
    if (statement === undefined) return undefined;
    const values = params.map((value, i) => this.serialized(value, statement.parameterTypes[i]!));
    const message = Buffer.concat([
      serialize.bind({ statement: statement.name, values }),
      serialize.describe({ type: "P" }),
      serialize.execute({}),
      serialize.sync(),
    ]);
    const { messages } = await this.pg.runExclusive(() => this.pg.execProtocol(message, { syncToFs: false }));
    return parse.parseResults(messages, this.pg.parsers)[0]?.rows as T[];
  }

  private async prepare(sql: string): Promise<Prepared> {
    const name = `svc_${++this.named}`;
    const message = Buffer.concat([serialize.parse({ name, text: sql }), serialize.describe({ type: "S", name }), serialize.sync()]);
    const { messages } = await this.pg.runExclusive(() => this.pg.execProtocol(message, { syncToFs: false }));
    const prepared = { name, parameterTypes: parse.parseDescribeStatementResults(messages) };
    this.prepared.set(sql, prepared);
    return prepared;
  }

  private serialized(value: unknown, type: number): string | null {
    if (value === null || value === undefined) return null;
    const serializer = this.pg.serializers[type];
    return serializer ? serializer(value) : String(value);
  }
}
