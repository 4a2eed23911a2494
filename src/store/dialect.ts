/**
 * The phrases PostgreSQL and SQLite spell differently, for statements written once for both.
 * PostgreSQL's spelling is the one its statements always had, so texts and plans there stay as
 * they were. What needs no phrase here: a cast of a parameter (`$1::bigint`), which the SQLite
 * backend drops (./sqlite.ts); `CAST(x AS type)`, which both read.
 *
 * SQLite keeps a timestamp as ISO 8601 text in UTC with six digits of fractional seconds
 * (./sqlite-values.ts), which compares as time does; the phrases below do their arithmetic on that
 * text through functions the SQLite backend defines (./sqlite.ts), to the microsecond, where
 * SQLite's own date functions keep milliseconds.
 */
import type { Db, DbKind } from "./db.ts";

type Dialect = Db | DbKind;

function kindOf(dialect: Dialect): DbKind {
  return typeof dialect === "string" ? dialect : dialect.kind;
}

/** The phrase for `dialect`: SQLite's or PostgreSQL's (which PGlite shares). */
export function spelled(dialect: Dialect, phrases: { postgres: string; sqlite: string }): string {
  return kindOf(dialect) === "sqlite" ? phrases.sqlite : phrases.postgres;
}

/**
 * `value` is an element of `array`, an array column or parameter (`$1::text[]`): `= ANY(...)` on
 * PostgreSQL; on SQLite, which has no arrays, membership in the JSON array it holds.
 */
export function isAnyOf(dialect: Dialect, value: string, array: string): string {
  return spelled(dialect, { postgres: `${value} = ANY (${array})`, sqlite: `${value} IN (SELECT value FROM json_each(${array}))` });
}

/** A VALUES list as a table `alias` with these column names (SQLite names them column1, column2, ...). */
export function valuesTable(dialect: Dialect, list: string, alias: string, columns: readonly string[]): string {
  return spelled(dialect, {
    postgres: `(VALUES ${list}) AS ${alias} (${columns.join(", ")})`,
    sqlite: `(SELECT ${columns.map((c, i) => `column${i + 1} AS ${c}`).join(", ")} FROM (VALUES ${list})) AS ${alias}`,
  });
}

/** The time `ms` milliseconds (an expression: `$3`, `$3::float8`) after the time `at`. */
export function plusMs(dialect: Dialect, at: string, ms: string): string {
  return shiftedMs(dialect, at, "+", ms);
}

/** The time `ms` milliseconds before the time `at`. */
export function minusMs(dialect: Dialect, at: string, ms: string): string {
  return shiftedMs(dialect, at, "-", ms);
}

function shiftedMs(dialect: Dialect, at: string, sign: "+" | "-", ms: string): string {
  return spelled(dialect, {
    postgres: `${at} ${sign} ${ms} * interval '1 millisecond'`,
    sqlite: `svc_plus_ms(${at}, ${sign === "-" ? "-" : ""}(${ms}))`,
  });
}

/** Milliseconds from the time `from` to the time `to`, as a float8. */
export function msBetween(dialect: Dialect, from: string, to: string): string {
  return spelled(dialect, {
    postgres: `(extract(epoch FROM (${to}) - (${from})) * 1000)::float8`,
    sqlite: `svc_ms_between(${from}, ${to})`,
  });
}

/**
 * A row lock (`FOR UPDATE`, `FOR NO KEY UPDATE SKIP LOCKED`, ...): none on SQLite, where one
 * connection writes at a time and a transaction's reads cannot be overtaken.
 */
export function rowLock(dialect: Dialect, clause: string): string {
  return spelled(dialect, { postgres: clause, sqlite: "" });
}

/**
 * `RETURNING` the updated table's `columns`. PostgreSQL needs them qualified by the table's
 * `alias` when the FROM list has columns of the same names; SQLite returns only the updated
 * table's columns and refuses a qualified name.
 */
export function returning(dialect: Dialect, alias: string, columns: readonly string[]): string {
  return `RETURNING ${columns.map((c) => (kindOf(dialect) === "sqlite" ? c : `${alias}.${c}`)).join(", ")}`;
}
