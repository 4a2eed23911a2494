/** Resource identifiers: a prefix plus a ULID, so sorting ids sorts by creation time. */
import { monotonicFactory } from "ulidx";

const ulid = monotonicFactory();

export type IdPrefix = "job" | "wh" | "evt" | "pay" | "node";

export function newId(prefix: IdPrefix): string {
  return `${prefix}_${ulid()}`;
}

const ID_PATTERN = /^(job|wh|evt)_[0-9A-HJKMNP-TV-Z]{26}$/;

export function isId(prefix: IdPrefix, value: string): boolean {
  const m = ID_PATTERN.exec(value);
  return m !== null && m[1] === prefix;
}

/** The ULID part of an id (26 characters); used where a short unique seed is needed on-chain. */
export function idBody(id: string): string {
  return id.slice(id.indexOf("_") + 1);
}
