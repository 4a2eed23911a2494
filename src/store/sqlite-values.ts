/**
 * How values cross into and out of SQLite so that a part reads the same JavaScript types as on
 * PostgreSQL (./db.ts): SQLite keeps five storage classes, and the declared type of a result's
 * column (which SQLite follows through aliases, subqueries, CTEs and RETURNING) says which
 * JavaScript type a stored value stands for. Timestamps are stored as ISO 8601 text in UTC with
 * six digits of fractional seconds (timestampText), which sorts as time does; JSON and arrays as
 * JSON text; booleans as 0 and 1.
 */
import type Database from "better-sqlite3";

/** A result column's reader, chosen once per statement from its declared type. */
export type Decoder = (value: unknown) => unknown;

const asIs: Decoder = (value) => value;
const asNumber: Decoder = (value) => (typeof value === "bigint" ? Number(value) : value);
const asBoolean: Decoder = (value) => (value === null ? null : value !== 0n && value !== 0);
const asDate: Decoder = (value) => (value === null ? null : new Date(value as string));
const asJson: Decoder = (value) => (value === null ? null : JSON.parse(value as string));

/**
 * The reader for a declared type. Statements read integers as bigint (safeIntegers), so an int8
 * column and an expression such as count(*) come back as bigint, as PostgreSQL's int8 does.
 */
export function decoderFor(declaredType: string | null): Decoder {
  switch (declaredType?.toLowerCase()) {
    case "integer":
    case "int":
    case "int4":
    case "smallint":
      return asNumber;
    case "boolean":
      return asBoolean;
    case "timestamptz":
      return asDate;
    case "jsonb":
    case "json":
      return asJson;
    default:
      return asIs;
  }
}

/** The decoders of a statement's result columns, in order. */
export function decodersOf(statement: Database.Statement): Decoder[] {
  return statement.columns().map((column) => decoderFor(column.type));
}

/**
 * `$1`-style parameters bound by name: SQLite reads `$1` as a parameter named "1", so the text
 * needs no rewriting and a parameter used twice is bound once.
 */
export function namedParameters(params: readonly unknown[]): Record<string, unknown> {
  const named: Record<string, unknown> = {};
  for (let i = 0; i < params.length; i++) named[i + 1] = toSqlite(params[i]);
  return named;
}

function toSqlite(value: unknown): unknown {
  if (value === undefined || value === null) return null;
  if (typeof value === "boolean") return value ? 1 : 0;
  if (value instanceof Date) return timestampText(value.getTime());
  if (value instanceof Uint8Array) return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  if (Array.isArray(value) || (typeof value === "object" && value.constructor === Object)) return jsonText(value);
  return value;
}

/**
 * JSON text with bigints as plain numbers: SQLite's JSON functions read a whole number up to
 * 2^63 exactly, where JSON.stringify refuses a bigint. Arrays reach statements this way, read
 * with `json_each($n)`.
 */
export function jsonText(value: unknown): string {
  if (typeof value === "bigint") return value.toString();
  if (Array.isArray(value)) return `[${value.map(jsonText).join(",")}]`;
  if (value !== null && typeof value === "object" && !(value instanceof Date)) {
    return `{${Object.entries(value).filter(([, v]) => v !== undefined).map(([k, v]) => `${JSON.stringify(k)}:${jsonText(v)}`).join(",")}}`;
  }
  return JSON.stringify(value ?? null);
}

/**
 * A time as stored: `YYYY-MM-DDTHH:MM:SS.ssssssZ`, microseconds like PostgreSQL's timestamptz, so
 * that rows written in one millisecond still order by their times (the latest of a wallet's keys,
 * say). Every stored time has this one length, so comparing the text compares the times. `ms`
 * may have a fraction, down to the microsecond.
 */
export function timestampText(ms: number): string {
  const whole = Math.floor(ms);
  const micros = Math.min(999, Math.round((ms - whole) * 1000));
  return `${new Date(whole).toISOString().slice(0, 23)}${String(micros).padStart(3, "0")}Z`;
}

/** Now, to the microsecond: the wall clock at this process's start plus its monotonic clock since. */
export function nowText(): string {
  return timestampText(performance.timeOrigin + performance.now());
}

/** The milliseconds since the epoch, with their fraction to the microsecond, of a stored time. */
export function timestampMs(text: string): number {
  const fraction = /\.(\d+)Z$/.exec(text)?.[1] ?? "";
  return Date.parse(text) + Number(`0.${fraction.slice(3, 6).padEnd(3, "0")}`);
}
