/** Reading a JSON-RPC call's positional params, refusing anything malformed with -32602. */
import type { Address } from "@solana/kit";
import { base58Decode } from "../../core/index.ts";
import { invalidParams } from "./errors.ts";

export type Params = readonly unknown[];

function bytes58(value: unknown, size: number, what: string): Uint8Array {
  if (typeof value !== "string") throw invalidParams(`${what} must be a base58 string`);
  try {
    return base58Decode(value, size);
  } catch {
    throw invalidParams(`${what} is not ${size} bytes of base58: ${JSON.stringify(value).slice(0, 100)}`);
  }
}

export function address(params: Params, i: number, what = "address"): Address {
  bytes58(params[i], 32, what);
  return params[i] as Address;
}

export function addressList(params: Params, i: number, max: number): Address[] {
  const list = params[i];
  if (!Array.isArray(list)) throw invalidParams("expected an array of addresses");
  if (list.length > max) throw invalidParams(`too many addresses: ${list.length} > ${max}`);
  return list.map((_, j) => address(list, j));
}

export function signature(value: unknown): string {
  bytes58(value, 64, "signature");
  return value as string;
}

export function blockhashBytes(params: Params, i: number): Uint8Array {
  return bytes58(params[i], 32, "blockhash");
}

/** The optional config object at `i`. */
export function config<T extends object>(params: Params, i: number): Partial<T> {
  const value = params[i];
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) throw invalidParams(`param ${i} must be a config object`);
  return value as Partial<T>;
}

export function u64(params: Params, i: number, what: string): bigint {
  const value = params[i];
  if (typeof value === "number" && Number.isSafeInteger(value) && value >= 0) return BigInt(value);
  if (typeof value === "bigint" && value >= 0n && value < 2n ** 64n) return value;
  throw invalidParams(`${what} must be a whole number >= 0`);
}

/** A transaction or message in `encoding` (base58 by default, as Solana's nodes read it). */
export function encodedBytes(value: unknown, encoding: unknown, what: string): Uint8Array {
  if (typeof value !== "string") throw invalidParams(`${what} must be an encoded string`);
  if (encoding === "base64") return new Uint8Array(Buffer.from(value, "base64"));
  if (encoding !== undefined && encoding !== "base58") throw invalidParams(`unsupported ${what} encoding ${JSON.stringify(encoding)}`);
  try {
    return base58Decode(value);
  } catch {
    throw invalidParams(`${what} is not base58`);
  }
}
