/** Helpers for building statements that write many rows at once. */
import { BoundedMap } from "../core/index.ts";
import type { Db, DbKind } from "./db.ts";
import { valuesTable } from "./dialect.ts";
import { isTransaction } from "./tx.ts";

/**
 * `($1::a, $2::b), ($3::a, $4::b)` for `rows` rows of the given column types, numbering
 * parameters from `offset + 1`. One statement for many rows; on PGlite a VALUES list measured about
 * twice as fast as unnest($1::text[], ...). Statements of the money path take theirs from
 * `addValues`, which pads the list.
 */
export function valuesList(rows: number, types: readonly string[], offset = 0): string {
  const key = `${rows}:${offset}:${types.join(",")}`;
  let list = lists.get(key);
  if (list === undefined) {
    list = Array.from({ length: rows }, (_, r) => `(${types.map((t, c) => `$${offset + r * types.length + c + 1}::${t}`).join(", ")})`).join(", ");
    lists.set(key, list);
  }
  return list;
}

/**
 * The lists made lately, by rows, offset and types: a group's statements repeat a few shapes, and
 * building each list anew would spend a loaded node's main thread on text it already made.
 */
const lists = new BoundedMap<string>(2_000);

/**
 * The rows a VALUES list of `rows` rows is padded to: the next power of two. PostgreSQL keeps a
 * plan per statement text, and an ANALYZE invalidates every plan over the tables it analyzed,
 * which then is planned again at its next run. With a list's exact length in the text, a loaded
 * node would make hundreds of texts, one per mix of group sizes, and plan them all again after
 * each ANALYZE, every 10 s while its tables grow: a noticeable share of its main thread.
 */
function paddedRowCount(rows: number): number {
  let padded = 1;
  while (padded < rows) padded *= 2;
  return padded;
}

/**
 * Adds `rows` (each one value per column of `types`) to `params`, then a row of NULLs for each
 * row of padding (paddedRowCount), and returns their VALUES list. A row of padding matches nothing
 * a join compares with `=`; an INSERT takes the list through `unpadded`. A row's first value is
 * never NULL.
 */
export function addValues(params: unknown[], types: readonly string[], rows: readonly (readonly unknown[])[]): string {
  const padded = paddedRowCount(rows.length);
  const list = valuesList(padded, types, params.length);
  for (const row of rows) {
    if (row.length !== types.length) throw new Error(`a row of ${row.length} values for ${types.length} columns`);
    if (row[0] === null || row[0] === undefined) throw new Error("a row's first value marks it as padding: it may not be NULL");
    params.push(...row);
  }
  for (let i = rows.length * types.length; i < padded * types.length; i++) params.push(null);
  return list;
}

/**
 * The rows of a list from `addValues` without its padding, as a query: what an INSERT takes. With
 * `condition`, a condition on the whole statement (the ledger's check of the pending transfers it
 * resolves), no row is taken unless it holds.
 */
export function unpadded(list: string, condition = "true"): string {
  return `SELECT * FROM (VALUES ${list}) AS padded WHERE padded.column1 IS NOT NULL AND ${condition}`;
}

/**
 * One statement carrying the writes of several parts: each part adds its own as named steps
 * (`WITH name AS (INSERT ...)`), and at most one step's result is what the statement returns.
 * PostgreSQL runs every data-modifying step exactly once, read or not, all against the
 * statement's one snapshot: a step must not need to see another's rows. A transaction that
 * writes four tables then costs one exchange with the database instead of four (a round trip on
 * PostgreSQL, a fixed cost per statement on PGlite), and each part still writes only its tables.
 *
 * SQLite has no data-modifying WITH, and there a statement costs microseconds: the steps run one
 * after another, in order, inside one transaction, each reading the rows an earlier step returned
 * through a WITH of its own. A step that a later one (or the result) reads names the columns it
 * returns, so that they can be handed on even when it returned no rows.
 */
export class CombinedStatement {
  readonly params: unknown[] = [];
  readonly #steps: { name: string; sql: string; columns?: readonly string[]; readBy: RegExp }[] = [];
  #result: string | undefined;
  /** The kind of database the statement will run on, whose dialect its steps are written in. */
  readonly kind: DbKind;

  constructor(db: Db | DbKind) {
    this.kind = typeof db === "string" ? db : db.kind;
  }

  /** A padded VALUES list for `rows` (each of the column `types`), numbered after the parameters so far (addValues). */
  values(types: readonly string[], rows: readonly (readonly unknown[])[]): string {
    return addValues(this.params, types, rows);
  }

  /** `values` as a table `alias` with these column names, in the statement's dialect (valuesTable). */
  table(types: readonly string[], rows: readonly (readonly unknown[])[], alias: string, columns: readonly string[]): string {
    return valuesTable(this.kind, this.values(types, rows), alias, columns);
  }

  /** A single parameter, `$n::type`. */
  param(value: unknown, type: string): string {
    this.params.push(value);
    return `$${this.params.length}::${type}`;
  }

  /**
   * Adds the step `name AS (sql)`; `sql` numbers its parameters with `values` and `param`.
   * `columns`: what it returns, when another step or the result reads it.
   */
  step(name: string, sql: string, columns?: readonly string[]): void {
    if (this.#steps.some((s) => s.name === name)) throw new Error(`the statement has a step named ${name} already`);
    this.#steps.push({ name, sql, ...(columns ? { columns } : {}), readBy: new RegExp(`\\b${name}\\b`) });
  }

  /** The SELECT over the steps that the statement returns; one part's, the only one that reads its result. */
  returns(select: string): void {
    if (this.#result !== undefined) throw new Error("the statement's result is given already");
    this.#result = select;
  }

  /** Runs the steps, in one statement, returning the rows of `returns` (none without it). */
  async run<T = Record<string, unknown>>(db: Db): Promise<T[]> {
    if (this.#steps.length === 0) return [];
    if ((db.kind === "sqlite") !== (this.kind === "sqlite")) throw new Error(`a statement written for ${this.kind} run on ${db.kind}`);
    if (db.kind === "sqlite") return isTransaction(db) ? this.#runStepByStep<T>(db) : db.transaction((tx) => this.#runStepByStep<T>(tx));
    const steps = this.#steps.map((s) => `${s.name} AS (${s.sql})`);
    return db.query<T>(`WITH ${steps.join(",\n")}\n${this.#result ?? "SELECT 1 WHERE false"}`, this.params);
  }

  /** SQLite: each step on its own, then the result, each given what the earlier steps returned. */
  async #runStepByStep<T>(tx: Db): Promise<T[]> {
    const returned = new Map<string, { columns: readonly string[]; rows: Record<string, unknown>[] }>();
    const withEarlier = async <R>(sql: string): Promise<R[]> => {
      const read = this.#steps.filter((s) => s.readBy.test(sql));
      const unnamed = read.find((s) => !s.columns);
      if (unnamed) throw new Error(`step ${unnamed.name} is read after it: name the columns it returns`);
      const params = [...this.params];
      const earlier = read.filter(({ name }) => returned.has(name)).map(({ name }) => {
        const { columns, rows } = returned.get(name)!;
        params.push(rows.map((row) => columns.map((c) => row[c])));
        const values = columns.map((c, i) => `value ->> ${i} AS ${c}`).join(", ");
        return `${name} (${columns.join(", ")}) AS (SELECT ${values} FROM json_each($${params.length}))`;
      });
      return tx.query<R>(earlier.length > 0 ? `WITH ${earlier.join(", ")} ${sql}` : sql, params);
    };
    for (const step of this.#steps) {
      const rows = await withEarlier<Record<string, unknown>>(step.sql);
      if (step.columns) returned.set(step.name, { columns: step.columns, rows });
    }
    return this.#result === undefined ? [] : withEarlier<T>(this.#result);
  }
}
