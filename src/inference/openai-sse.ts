/**
 * A server-sent-events reader for upstream chat streams, after the WHATWG event-stream rules:
 * lines end in LF, CRLF or a lone CR (a CRLF may be split across two reads); `data:` with or
 * without the space; `:` comment lines (keep-alives) are skipped; an event ends at a blank line.
 * Bytes are decoded as one UTF-8 stream, so a character split across TCP reads survives.
 */

export interface SseEvent {
  /** The `event:` field, "message" when absent; "error" for llama-server's `error:` lines. */
  event: string;
  data: string;
}

/** No chat chunk comes near this; a peer sending endless bytes without a newline is broken. */
export const MAX_SSE_LINE_CHARS = 8 * 1024 * 1024;

export class SseParser {
  private pending = "";
  // The previous text ended in CR: a LF at the start of the next belongs to the same line end.
  private skipLf = false;
  private dataLines: string[] = [];
  private eventType = "";

  /** Feeds decoded text; returns the events it completed. */
  push(text: string): SseEvent[] {
    const events: SseEvent[] = [];
    let start = 0;
    if (this.skipLf && text.length > 0) {
      this.skipLf = false;
      if (text.charCodeAt(0) === 10) start = 1;
    }
    for (let i = start; i < text.length; i++) {
      const c = text.charCodeAt(i);
      if (c !== 10 && c !== 13) continue;
      const line = this.pending + text.slice(start, i);
      this.pending = "";
      this.line(line, events);
      if (c === 13) {
        if (i + 1 === text.length) this.skipLf = true;
        else if (text.charCodeAt(i + 1) === 10) i++;
      }
      start = i + 1;
    }
    this.pending += text.slice(start);
    if (this.pending.length > MAX_SSE_LINE_CHARS) throw new Error(`an event-stream line exceeds ${MAX_SSE_LINE_CHARS} characters`);
    return events;
  }

  /**
   * The stream ended. Unlike a browser, this keeps an event that lacks its final blank line: a
   * server that closes right after `data: [DONE]\n` has still said it.
   */
  end(): SseEvent[] {
    const events: SseEvent[] = [];
    if (this.pending !== "") this.line(this.pending, events);
    this.pending = "";
    this.dispatch(events);
    return events;
  }

  private line(line: string, events: SseEvent[]): void {
    if (line === "") return this.dispatch(events);
    if (line.startsWith(":")) return;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "data":
        this.dataLines.push(value);
        break;
      case "event":
        this.eventType = value;
        break;
      case "error":
        // llama-server reports a failure during a stream as an `error:` field, not as an event type.
        this.eventType = "error";
        this.dataLines.push(value);
        break;
      // id, retry and unknown fields carry nothing a chat stream needs.
    }
  }

  private dispatch(events: SseEvent[]): void {
    if (this.dataLines.length > 0) events.push({ event: this.eventType || "message", data: this.dataLines.join("\n") });
    this.dataLines = [];
    this.eventType = "";
  }
}

/** The events of a byte stream; `onBytes` runs as each read arrives (the caller's idle timer). */
export async function* readSse(body: AsyncIterable<Uint8Array>, onBytes?: () => void): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder("utf-8");
  const parser = new SseParser();
  for await (const bytes of body) {
    onBytes?.();
    yield* parser.push(decoder.decode(bytes, { stream: true }));
  }
  yield* parser.push(decoder.decode());
  yield* parser.end();
}
