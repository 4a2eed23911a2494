/**
 * The output of a job whose caller reads it only at its end (a JSON reply). What the engine
 * produces in one turn of the event loop goes to the gateway in one delta, later pieces at most
 * every HELD_OUTPUT_MS (or as soon as HELD_OUTPUT_CHARS characters are held), and what is held
 * when the job ends rides in its `done`. A fast upstream's whole answer then costs one message
 * instead of one per token, and the gateway still hears from a long job often enough to know it
 * is alive.
 */
import { HELD_OUTPUT_CHARS, HELD_OUTPUT_MS } from "../network/index.ts";

export class HeldOutput {
  private text = "";
  private lastSentAtMs = Number.NEGATIVE_INFINITY;
  private cancelFlush: (() => void) | undefined;

  constructor(
    private readonly sendDelta: (text: string) => void,
    private readonly intervalMs = HELD_OUTPUT_MS,
  ) {}

  add(text: string): void {
    this.text += text;
    if (this.text.length >= HELD_OUTPUT_CHARS) return this.flush();
    if (this.cancelFlush) return;
    const waitMs = this.lastSentAtMs + this.intervalMs - Date.now();
    if (waitMs > 0) {
      const timer = setTimeout(() => this.flush(), waitMs);
      this.cancelFlush = () => clearTimeout(timer);
    } else {
      const immediate = setImmediate(() => this.flush());
      this.cancelFlush = () => clearImmediate(immediate);
    }
  }

  /** Sends what is held now (before a job_error, say, so the gateway has all the output there was). */
  flush(): void {
    const text = this.take();
    if (text === "") return;
    this.lastSentAtMs = Date.now();
    this.sendDelta(text);
  }

  /** What is held, for the message that ends the job; nothing more is sent after it. */
  take(): string {
    this.cancelFlush?.();
    this.cancelFlush = undefined;
    const text = this.text;
    this.text = "";
    return text;
  }
}
