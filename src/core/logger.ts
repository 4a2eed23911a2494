/**
 * The service's structured logger (pino). Log records are JSON for machines (files, collectors,
 * anything that is not a terminal); on a terminal each record is one readable line instead:
 * time, level, message, then the record's fields as key=value.
 */
import { pino, type DestinationStream, type Logger } from "pino";

export type { Logger };

export type LogFormat = "pretty" | "json";
export const LOG_FORMATS: readonly LogFormat[] = ["pretty", "json"];

export function createLogger(options: { level?: string; format?: LogFormat; destination?: NodeJS.WritableStream } = {}): Logger {
  const level = options.level ?? process.env.LOG_LEVEL ?? "info";
  const out = options.destination ?? process.stdout;
  const format = options.format ?? defaultLogFormat();
  if (format === "json") return pino({ level }, out as DestinationStream);
  const color = (out as { isTTY?: boolean }).isTTY === true && !process.env.NO_COLOR;
  return pino({ level }, prettyDestination(out, color));
}

/** SVC_LOG_FORMAT when set (pretty or json), else pretty on a terminal and JSON anywhere else. */
export function defaultLogFormat(env: NodeJS.ProcessEnv = process.env, isTTY = process.stdout.isTTY === true): LogFormat {
  const asked = env.SVC_LOG_FORMAT;
  if (asked === "pretty" || asked === "json") return asked;
  return isTTY ? "pretty" : "json";
}

/** A logger that drops everything, for tests and embedded use. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}

function prettyDestination(out: NodeJS.WritableStream, color: boolean): DestinationStream {
  return {
    write(line: string) {
      let record: Record<string, unknown>;
      try {
        record = JSON.parse(line) as Record<string, unknown>;
      } catch {
        out.write(line); // not pino's JSON: pass it through untouched
        return;
      }
      out.write(`${formatLogLine(record, { color })}\n`);
    },
  };
}

const LEVELS: Record<number, { name: string; color: string }> = {
  10: { name: "TRACE", color: "90" },
  20: { name: "DEBUG", color: "90" },
  30: { name: "INFO", color: "32" },
  40: { name: "WARN", color: "33" },
  50: { name: "ERROR", color: "31" },
  60: { name: "FATAL", color: "31" },
};
// pino's own bookkeeping, said by the line's layout or of no use to a person reading it.
const OMITTED = new Set(["level", "time", "msg", "pid", "hostname", "v"]);

/**
 * One pino record as a line for people: `12:04:05.120 INFO  message key=value ...`. An error's
 * stack, when there is one at level error or above, follows on indented lines.
 */
export function formatLogLine(record: Record<string, unknown>, options: { color?: boolean } = {}): string {
  const paint = (code: string, text: string) => (options.color ? `\x1b[${code}m${text}\x1b[0m` : text);
  const level = LEVELS[Number(record.level)] ?? { name: String(record.level ?? "LOG").toUpperCase(), color: "0" };
  const time = typeof record.time === "number" ? clockTime(new Date(record.time)) : "--:--:--.---";
  const parts = [paint("2", time), paint(level.color, level.name.padEnd(5))];
  if (typeof record.msg === "string" && record.msg !== "") parts.push(record.msg);
  let stack: string | undefined;
  for (const [key, value] of Object.entries(record)) {
    if (OMITTED.has(key) || value === undefined) continue;
    if (isSerializedError(value)) {
      parts.push(`${paint("2", `${key}=`)}${fieldValue(`${value.type ?? "Error"}: ${value.message}`)}`);
      if (Number(record.level) >= 50 && typeof value.stack === "string") stack = value.stack;
      continue;
    }
    parts.push(`${paint("2", `${key}=`)}${fieldValue(value)}`);
  }
  const line = parts.join(" ");
  if (!stack) return line;
  const frames = stack.split("\n").filter((l) => /^\s+at /.test(l));
  return [line, ...frames.map((f) => `    ${f.trim()}`)].join("\n");
}

function clockTime(date: Date): string {
  const two = (n: number) => String(n).padStart(2, "0");
  return `${two(date.getHours())}:${two(date.getMinutes())}:${two(date.getSeconds())}.${String(date.getMilliseconds()).padStart(3, "0")}`;
}

/** Bare when unambiguous, JSON otherwise, so `key=value` splits on spaces and '='. */
function fieldValue(value: unknown): string {
  if (typeof value === "string") return /^[^\s"=]+$/.test(value) ? value : JSON.stringify(value);
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint" || value === null) return String(value);
  return JSON.stringify(value);
}

function isSerializedError(value: unknown): value is { type?: string; message: string; stack?: string } {
  return typeof value === "object" && value !== null && typeof (value as { message?: unknown }).message === "string" && "stack" in value;
}
