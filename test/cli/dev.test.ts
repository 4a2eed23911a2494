/**
 * `svc dev` as a person runs it, twice on one data dir: the first start funds the dev wallet,
 * the second tops it up with --credits through a real deposit (its chain transaction, ledger
 * entry and credit.topup event). Each start's console is read line by line, once in each log
 * format: the banner stands on its own lines, log records are readable lines or whole JSON
 * objects, and shutdown says what it is doing.
 */
import assert from "node:assert/strict";
import { after, test } from "node:test";
import { openChain } from "../../src/chain/index.ts";
import { availableCredits } from "../../src/jobs/money.ts";
import { openDb } from "../../src/store/index.ts";
import { keepEvents } from "../support/kept-events.ts";
import { tempDir } from "../support/service.ts";
import { killAll, startSvc, type SvcProcess } from "./svc-process.ts";

const dir = await tempDir("svc-dev-cli-");
after(async () => {
  killAll();
  await dir.remove();
});

const BANNER_LINE = /^(|Base URL: \S+|App: \S+ \(sign in with "Use the dev wallet"\)|Solana RPC: \S+|Model: .+|Dev wallet: \w+|Credits: .+|API key: .+|  \(shown once.+|Try it:|  curl .+|Press Ctrl-C to stop\.)$/;
const PRETTY_LINE = /^\d\d:\d\d:\d\d\.\d{3} (TRACE|DEBUG|INFO |WARN |ERROR|FATAL) \S/;

async function startDev(args: string[]): Promise<SvcProcess> {
  const dev = startSvc(["dev", "--port", "0", "--rpc-port", "0", "--data-dir", dir.path, ...args], { LOG_LEVEL: "info" });
  await dev.waitFor(/Press Ctrl-C to stop\./, 120_000);
  return dev;
}

async function stopDev(dev: SvcProcess): Promise<string[]> {
  dev.child.kill("SIGINT");
  const { code } = await dev.exited();
  assert.equal(code, 0, dev.stdout() + dev.stderr());
  assert.equal(dev.stderr(), "", "nothing on stderr");
  return dev.stdout().split("\n");
}

test("two starts on one data dir: funded, then topped up by --credits; pretty and JSON consoles", async () => {
  const first = await startDev(["--log-format", "pretty"]);
  assert.match(first.stdout(), /^Credits: 10000 \(funded with 10000 by an on-chain deposit\)$/m);
  assert.match(first.stdout(), /^App: http:\/\/127\.0\.0\.1:\d+\/ /m, "the web app's address");
  const wallet = /^Dev wallet: (\w+)$/m.exec(first.stdout())![1]!;
  const firstLines = await stopDev(first);
  for (const line of firstLines) assert.ok(BANNER_LINE.test(line) || PRETTY_LINE.test(line), `neither banner nor a readable log line: ${line}`);
  const steps = firstLines.filter((l) => PRETTY_LINE.test(l)).map((l) => l.slice(19));
  const shutdown = steps.slice(steps.findIndex((s) => s.startsWith("shutting down")));
  assert.deepEqual(
    shutdown.filter((s) => !s.startsWith("worker left")),
    [
      "shutting down signal=SIGINT",
      "refusing new requests; draining running jobs runningJobs=0",
      "closing worker connections",
      "stopping webhook delivery",
      "closing the chain and the database",
      "stopping the seed worker and unloading the model",
      "stopped",
    ],
  );

  // A webhook of the dev wallet keeps its events from here on: none are written for nobody.
  const kept = await openDb({ dataDir: dir.path });
  await keepEvents(kept, wallet).finally(() => kept.close());

  const second = await startDev(["--credits", "500", "--log-format", "json"]);
  assert.match(second.stdout(), /^Credits: 10500 \(topped up by 500 with an on-chain deposit\)$/m);
  assert.match(second.stdout(), /^API key: shown at first start/m, "the key is not shown again");
  const secondLines = await stopDev(second);
  const records = secondLines.filter((l) => l.startsWith("{")).map((l) => JSON.parse(l) as { level: number; msg: string });
  for (const line of secondLines) assert.ok(BANNER_LINE.test(line) || line.startsWith("{"), `neither banner nor JSON: ${line}`);
  assert.ok(records.some((r) => r.msg === "worker registered" && r.level === 30));
  assert.equal(records.at(-1)?.msg, "stopped");

  // The top-up is a deposit like the first funding: on the chain, in the ledger, and as an event.
  const db = await openDb({ dataDir: dir.path });
  const chain = await openChain({ dataDir: dir.path });
  try {
    const deposits = await db.query<{ state: string; params: { credits: number } }>(
      "SELECT state, params FROM chain_actions WHERE kind = 'deposit' AND subject = $1 ORDER BY created_at",
      [wallet],
    );
    assert.deepEqual(deposits.map((d) => [d.state, d.params.credits]), [["confirmed", 10000], ["confirmed", 500]]);
    assert.equal(await availableCredits(db, wallet), 10500);
    assert.equal(await chain.creditBalance(wallet), 10500n * 10_000n, "credit account on-chain, in base units");
    const topups = await db.query<{ body: string }>("SELECT body FROM events WHERE account = $1 AND name = 'credit.topup' ORDER BY id", [wallet]);
    const data = topups.map((t) => (JSON.parse(t.body) as { data: { credits_added: number; credits_remaining: number; deposit_tx: string } }).data);
    assert.deepEqual(data.map((d) => [d.credits_added, d.credits_remaining]), [[500, 10500]]);
  } finally {
    await chain.close();
    await db.close();
  }
});
