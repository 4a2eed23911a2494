/** Helpers for building statements that write many rows at once. */

/**
 * `($1::a, $2::b), ($3::a, $4::b)` for `rows` rows of the given column types, numbering
 * parameters from `offset + 1`. One statement for many rows; on PGlite a VALUES list measured about
 * twice as fast as unnest($1::text[], ...).
 */
export function valuesList(rows: number, types: readonly string[], offset = 0): string {
  return Array.from({ length: rows }, (_, r) => `(${types.map((t, c) => `$${offset + r * types.length + c + 1}::${t}`).join(", ")})`).join(", ");
}
