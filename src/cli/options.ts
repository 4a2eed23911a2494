/**
 * Option values the service's start commands (`svc dev`, `svc serve`) read alike: each returns
 * the parsed value or a message saying what is wrong, which the command prints before exiting 2.
 */
import { LOG_FORMATS, type LogFormat, type RateLimitOptions, defaultLogFormat, parseRateLimit } from "../core/index.ts";

export type Parsed<T> = { ok: true; value: T } | { ok: false; message: string };

export function portOption(flag: string, text: string): Parsed<number> {
  const port = Number(text);
  return Number.isInteger(port) && port >= 0 && port <= 65535 ? { ok: true, value: port } : { ok: false, message: `${flag} must be a port number, got '${text}'` };
}

/** --rate-limit, else SVC_RATE_LIMIT, else undefined (the service's default). */
export function rateLimitOption(text: string | undefined): Parsed<RateLimitOptions | false | undefined> {
  const given = text ?? process.env.SVC_RATE_LIMIT;
  try {
    return { ok: true, value: given === undefined ? undefined : parseRateLimit(given) };
  } catch (error) {
    return { ok: false, message: `--rate-limit: ${(error as Error).message}` };
  }
}

/** --log-format, else SVC_LOG_FORMAT or what suits the terminal. */
export function logFormatOption(text: string | undefined): Parsed<LogFormat> {
  const format = text ?? defaultLogFormat();
  return LOG_FORMATS.includes(format as LogFormat) ? { ok: true, value: format as LogFormat } : { ok: false, message: `--log-format is pretty or json, got '${format}'` };
}

/** --priority-fee, else SVC_PRIORITY_FEE: whole micro-lamports per compute unit; undefined for none. */
export function priorityFeeOption(text: string | undefined): Parsed<bigint | undefined> {
  const given = text ?? process.env.SVC_PRIORITY_FEE;
  if (given === undefined || given === "") return { ok: true, value: undefined };
  return /^\d{1,12}$/.test(given) ? { ok: true, value: BigInt(given) } : { ok: false, message: `--priority-fee is a whole number of micro-lamports per compute unit, got '${given}'` };
}
