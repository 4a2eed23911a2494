/**
 * `svc serve` as a real process, configured from the environment as a process manager would: it
 * prints where it answers, is not ready until a worker joins, then serves a `svc worker` that
 * connects to it; it offers no dev wallet and no faucet; Ctrl-C exits 0. Bad options (a seed pool
 * address that is not one among them) exit 2.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { address, createSolanaRpc, lamports } from "@solana/kit";
import { generateKeypair } from "../../src/core/keys.ts";
import { tempDir } from "../support/service.ts";
import { killWorkers, spawnWorker, workerAddress } from "../support/worker-process.ts";
import { startSvc } from "./svc-process.ts";

test("starts from the environment, becomes ready when a worker joins, has no dev wallet or faucet", async (t) => {
  const dir = await tempDir("svc-serve-");
  t.after(async () => {
    killWorkers();
    await dir.remove();
  });
  const keypair = `${dir.path}/worker.json`;
  const env = { SVC_PORT: "0", SVC_RPC_PORT: "0", SVC_DATA_DIR: dir.path, SVC_LOG_FORMAT: "json", DATABASE_URL: "", SVC_SEED_WORKERS: await workerAddress(keypair) };
  const run = startSvc(["serve"], env);
  const origin = (await run.waitFor(/^App: (http:\/\/127\.0\.0\.1:\d+)\/$/m, 60_000))[1]!;
  const rpcUrl = (await run.waitFor(/^Solana RPC: (http:\/\/127\.0\.0\.1:\d+)$/m))[1]!;
  assert.match(run.stdout(), new RegExp(`^Base URL: ${origin}/v1$`, "m"));
  assert.doesNotMatch(run.stdout(), /Dev wallet|API key/);

  const notReady = await fetch(`${origin}/readyz`);
  assert.equal(notReady.status, 503);
  assert.equal(((await notReady.json()) as { checks: { workers: string } }).checks.workers, "no worker connected that is sold to callers");

  const worker = await spawnWorker({ gateway: origin, keypair, modelsDir: `${dir.path}/models` });
  await worker.waitFor(/Connected to /);
  const ready = await fetch(`${origin}/readyz`);
  assert.equal(ready.status, 200, await ready.clone().text());

  const dev = await fetch(`${origin}/app/api/session/dev`, { method: "POST", headers: { origin } });
  assert.equal(dev.status, 404, "no dev sign-in");
  const rpc = createSolanaRpc(rpcUrl);
  assert.equal(await rpc.getHealth().send(), "ok", "anyone can read the chain");
  await assert.rejects(rpc.requestAirdrop(address(generateKeypair().address), lamports(1_000n)).send(), /development chains only/);

  run.child.kill("SIGINT");
  assert.equal((await run.exited()).code, 0);
});

test("a flag it does not know, or a bad port, exits 2 with the usage", async () => {
  const unknown = startSvc(["serve", "--credits", "5"]);
  assert.equal((await unknown.exited()).code, 2);
  assert.match(unknown.stderr(), /^svc serve: Unknown option '--credits'/);
  assert.match(unknown.stderr(), /Usage: svc serve/);
  const port = startSvc(["serve"], { SVC_PORT: "http" });
  assert.equal((await port.exited()).code, 2);
  assert.match(port.stderr(), /--port must be a port number, got 'http'/);
  const fee = startSvc(["serve", "--priority-fee", "0.5"]);
  assert.equal((await fee.exited()).code, 2);
  assert.match(fee.stderr(), /--priority-fee is a whole number of micro-lamports per compute unit, got '0.5'/);
  const escrow = startSvc(["serve"], { SVC_ESCROW: "batches" });
  assert.equal((await escrow.exited()).code, 2);
  assert.match(escrow.stderr(), /--escrow is records or tables, got 'batches'/);
  const seeds = startSvc(["serve"], { SVC_SEED_WORKERS: `${generateKeypair().address},not-a-key` });
  assert.equal((await seeds.exited()).code, 2);
  assert.match(seeds.stderr(), /--seed-workers takes worker addresses \(base58 public keys\) separated by commas; 'not-a-key' is not one/);
});
