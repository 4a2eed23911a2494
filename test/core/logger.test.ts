/** The console's log lines: the pretty format as a pure function, and which format is chosen when. */
import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { describe, it } from "node:test";
import { createLogger, defaultLogFormat, formatLogLine } from "../../src/core/logger.ts";

const at = new Date(2026, 10, 22, 9, 5, 7, 42).getTime(); // local time, as the line shows it

describe("formatLogLine", () => {
  it("is time, level, message, then key=value fields, dropping pino's bookkeeping", () => {
    const line = formatLogLine({ level: 30, time: at, pid: 1, hostname: "h", msg: "completion", status: 200, model: "svc-dev/wiring-model", ms: 12.5, stream: false });
    assert.equal(line, "09:05:07.042 INFO  completion status=200 model=svc-dev/wiring-model ms=12.5 stream=false");
  });

  it("quotes values that would not split cleanly, and writes objects and arrays as JSON", () => {
    const line = formatLogLine({ level: 40, time: at, msg: "worker left", reason: "the gateway is shutting down", eq: "a=b", empty: "", models: ["m1"], usage: { in: 1 }, none: null });
    assert.equal(line, `09:05:07.042 WARN  worker left reason="the gateway is shutting down" eq="a=b" empty="" models=["m1"] usage={"in":1} none=null`);
  });

  it("shows an error as type and message, with its stack frames below only at error level and above", () => {
    const err = { type: "TypeError", message: "boom", stack: "TypeError: boom\n    at f (a.ts:1:2)\n    at g (b.ts:3:4)" };
    assert.equal(formatLogLine({ level: 40, time: at, msg: "retrying", err }), `09:05:07.042 WARN  retrying err="TypeError: boom"`);
    assert.equal(
      formatLogLine({ level: 50, time: at, msg: "request failed", err }),
      `09:05:07.042 ERROR request failed err="TypeError: boom"\n    at f (a.ts:1:2)\n    at g (b.ts:3:4)`,
    );
  });

  it("colours the level and dims the rest only when asked", () => {
    const line = formatLogLine({ level: 50, time: at, msg: "x", a: 1 }, { color: true });
    assert.equal(line, "\x1b[2m09:05:07.042\x1b[0m \x1b[31mERROR\x1b[0m x \x1b[2ma=\x1b[0m1");
  });
});

describe("log format", () => {
  it("is pretty on a terminal, JSON elsewhere, and SVC_LOG_FORMAT overrides either", () => {
    assert.equal(defaultLogFormat({}, true), "pretty");
    assert.equal(defaultLogFormat({}, false), "json");
    assert.equal(defaultLogFormat({ SVC_LOG_FORMAT: "json" }, true), "json");
    assert.equal(defaultLogFormat({ SVC_LOG_FORMAT: "pretty" }, false), "pretty");
    assert.equal(defaultLogFormat({ SVC_LOG_FORMAT: "yaml" }, false), "json", "an unknown value falls back");
  });

  it("writes one line per record through pino in either format", () => {
    const capture = (format: "pretty" | "json") => {
      const out = new PassThrough();
      let text = "";
      out.on("data", (d: Buffer) => (text += d.toString()));
      const logger = createLogger({ format, level: "info", destination: out });
      logger.info({ job: "job_1", tokens: 7 }, "completion");
      logger.debug("hidden below the level");
      return text;
    };
    assert.match(capture("pretty"), /^\d\d:\d\d:\d\d\.\d{3} INFO  completion job=job_1 tokens=7\n$/);
    const json = capture("json");
    assert.equal(json.split("\n").length, 2);
    assert.deepEqual({ ...JSON.parse(json), time: 0, pid: 0, hostname: "" }, { level: 30, time: 0, pid: 0, hostname: "", job: "job_1", tokens: 7, msg: "completion" });
  });
});
