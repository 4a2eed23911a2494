/**
 * `--model hf:...` as a new user meets it, through real `svc dev` and `svc worker` processes:
 * HF_ENDPOINT points at a loopback server this test controls, which refuses, accepts and never
 * answers, answers and then stops sending, or serves the project's own tiny GGUF. A failure is
 * one line on stderr (what was tried, what to do instead) and a non-zero exit within seconds.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { WIRING_MODEL_ID } from "../../src/catalog/catalog.ts";
import { buildWiringModel } from "../../src/inference/wiring-model.ts";
import { tempDir } from "../support/service.ts";
import { killAll, runSvc, startSvc } from "./svc-process.ts";

type Mode = "serve" | "silent" | "stall-body";
const MODEL_BYTES = buildWiringModel();
const SPEC = "hf:svc-test/tiny/svc-wiring-model.gguf";
const FILE_PATH = "/svc-test/tiny/resolve/main/svc-wiring-model.gguf";
const STALL_S = 2;
// Starting node with tsx and llama.cpp costs a few seconds on a busy machine; the stall itself is 2 s.
const FAIL_WITHIN_MS = 20_000;

let mode: Mode = "serve";
let server: Server;
let endpoint: string;
let refusingEndpoint: string;
const dir = await tempDir("svc-model-download-");

function answer(req: IncomingMessage, res: ServerResponse): void {
  if (mode === "silent") return; // accepted, never answered
  if (!req.url?.startsWith(FILE_PATH)) {
    res.writeHead(404).end("Entry not found");
    return;
  }
  const range = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? "");
  const from = range ? Number(range[1]) : 0;
  const to = range?.[2] ? Math.min(Number(range[2]), MODEL_BYTES.length - 1) : MODEL_BYTES.length - 1;
  const body = MODEL_BYTES.subarray(from, to + 1);
  res.writeHead(range ? 206 : 200, {
    "content-type": "application/octet-stream",
    "content-length": body.length,
    "accept-ranges": "bytes",
    ...(range ? { "content-range": `bytes ${from}-${to}/${MODEL_BYTES.length}` } : {}),
  });
  if (req.method === "HEAD") res.end();
  else if (mode === "serve") res.end(body);
  else res.write(body.subarray(0, body.length >> 1)); // half, then silence
}

before(async () => {
  server = createServer(answer);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const closed = createServer();
  await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve));
  refusingEndpoint = `http://127.0.0.1:${(closed.address() as AddressInfo).port}`;
  await new Promise((resolve) => closed.close(resolve));
});
after(async () => {
  killAll();
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await dir.remove();
});

const env = (hfEndpoint: string) => ({ HF_ENDPOINT: hfEndpoint, SVC_DOWNLOAD_STALL_S: String(STALL_S) });
const dev = (model: string, sub: string) => ["dev", "--port", "0", "--data-dir", join(dir.path, sub), "--model", model];
const worker = (engine: string, sub: string) => [
  "worker",
  "--gateway",
  refusingEndpoint,
  "--keypair",
  join(dir.path, sub, "worker.json"),
  "--models-dir",
  join(dir.path, sub, "models"),
  "--model",
  `${WIRING_MODEL_ID}=${engine}`,
];

/** The process failed fast with exactly one line on stderr (after any progress bar), and no stack trace. */
function assertOneLineFailure(run: { code: number | null; ms: number; stderr: string }, pattern: RegExp): string {
  assert.notEqual(run.code, 0, "exit code");
  assert.ok(run.ms < FAIL_WITHIN_MS, `failed after ${run.ms.toFixed(0)} ms`);
  const lines = run.stderr.split("\n").filter((l) => l.trim() !== "" && !l.includes("Downloading model ["));
  assert.equal(lines.length, 1, `one line on stderr:\n${run.stderr}`);
  assert.match(lines[0]!, pattern);
  assert.doesNotMatch(run.stderr, /^\s+at /m, "no stack trace");
  return lines[0]!;
}

describe("svc dev --model hf:...", () => {
  test("a refused connection fails at once, naming the URL tried and the way out", async () => {
    const run = await runSvc(dev(SPEC, "refused"), env(refusingEndpoint));
    const line = assertOneLineFailure(run, /^svc dev: could not download hf:svc-test\/tiny\/svc-wiring-model\.gguf: .* refused the connection/);
    assert.ok(line.includes(`tried ${refusingEndpoint}${FILE_PATH}`), line);
    assert.match(line, /local \.gguf path/);
    assert.match(line, /HF_ENDPOINT/);
    console.log(`refused: failed in ${run.ms.toFixed(0)} ms`);
  });

  test("a missing local file is one clear line", async () => {
    const missing = join(dir.path, "nowhere", "model.gguf");
    assertOneLineFailure(await runSvc(dev(missing, "missing"), {}), new RegExp(`^svc dev: model file not found: ${missing}$`));
  });
});

describe("svc worker --model <id>=hf:...", () => {
  test("a host that accepts and never answers fails after the stall timeout", async () => {
    mode = "silent";
    const run = await runSvc(worker(SPEC, "silent"), env(endpoint));
    mode = "serve";
    assertOneLineFailure(run, new RegExp(`no answer from 127\\.0\\.0\\.1:\\d+ within ${STALL_S} s .*HF_ENDPOINT`));
    assert.ok(run.ms > STALL_S * 1000, "it waited the stall timeout");
    console.log(`silent host: failed in ${run.ms.toFixed(0)} ms`);
  });

  test("a download that stops sending fails after the stall timeout, its progress bar ended first", async () => {
    mode = "stall-body";
    const run = await runSvc(worker(SPEC, "stall"), env(endpoint));
    mode = "serve";
    assertOneLineFailure(run, new RegExp(`^svc worker: could not load ${WIRING_MODEL_ID}: could not download ${SPEC}: no data from 127\\.0\\.0\\.1:\\d+ for ${STALL_S} s`));
    assert.match(run.stderr, /Downloading model \[#+ *\] \d+%/, "the bar showed the bytes that came");
    console.log(`stalled download: failed in ${run.ms.toFixed(0)} ms`);
  });

  test("a download that runs shows its progress bar, and the file is reused without the network", async () => {
    const first = startSvc(worker(SPEC, "served"), env(endpoint));
    await first.waitFor(new RegExp(`Serving ${WIRING_MODEL_ID} with ${SPEC}, context window 2048 tokens`));
    assert.match(first.stderr(), /Downloading model \[#{30}\] 100% 0\.\d\/0\.\d MB\n/);
    first.child.kill("SIGTERM");
    assert.equal((await first.exited()).code, 0);

    const again = startSvc(worker(SPEC, "served"), env(refusingEndpoint));
    await again.waitFor(new RegExp(`Serving ${WIRING_MODEL_ID} with ${SPEC}`));
    assert.doesNotMatch(again.stderr(), /Downloading/);
    again.child.kill("SIGTERM");
    await again.exited();
  });

  test("a malformed hf: spec is one clear line", async () => {
    const run = await runSvc(worker("hf:svc-test/tiny.gguf", "malformed"), env(refusingEndpoint));
    assertOneLineFailure(run, /^svc worker: could not load svc-dev\/wiring-model: expected hf:owner\/repo\/path\/to\/file\.gguf, got 'hf:svc-test\/tiny\.gguf'$/);
  });
});
