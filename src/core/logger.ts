/** The service's structured logger (pino). */
import { pino, type Logger } from "pino";

export type { Logger };

export function createLogger(options: { level?: string; pretty?: boolean } = {}): Logger {
  return pino({ level: options.level ?? process.env.LOG_LEVEL ?? "info" });
}

/** A logger that drops everything, for tests and embedded use. */
export function silentLogger(): Logger {
  return pino({ level: "silent" });
}
