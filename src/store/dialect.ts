/**
 * The few phrases PostgreSQL and SQLite spell differently, for statements written once for both.
 * PostgreSQL's spelling is the one its statements always had, so plans and texts there are unchanged.
 */
import type { Db } from "./db.ts";

/**
 * `column` is one of the array parameter `param` (`$n`): `= ANY($n::type[])` on PostgreSQL; on
 * SQLite, which has no arrays, membership in the JSON array the parameter is bound as.
 */
export function isAnyOf(db: Db, column: string, param: string, type: string): string {
  return db.kind === "sqlite" ? `${column} IN (SELECT value FROM json_each(${param}))` : `${column} = ANY(${param}::${type}[])`;
}
