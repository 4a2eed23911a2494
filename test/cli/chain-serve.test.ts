/**
 * `svc chain serve` as a real process: it prints its JSON-RPC URL, kit's client reads the escrow
 * program's config there and funds a key from the faucet, Ctrl-C stops it cleanly, and a restart
 * on the same data dir has the same state.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { address, createSolanaRpc, lamports } from "@solana/kit";
import { configAddress, decodeConfig, ESCROW_PROGRAM } from "../../src/chain/escrow-program/index.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { tempDir } from "../support/service.ts";
import { startSvc } from "./svc-process.ts";

async function serve(dataDir: string) {
  const run = startSvc(["chain", "serve", "--port", "0", "--data-dir", dataDir]);
  const url = (await run.waitFor(/^Solana RPC: (http:\/\/127\.0\.0\.1:\d+)$/m, 60_000))[1]!;
  await run.waitFor(/Press Ctrl-C to stop\./);
  return { run, rpc: createSolanaRpc(url) };
}

test("serves the chain with the escrow program's config; survives a restart; Ctrl-C exits 0", async (t) => {
  const dir = await tempDir("svc-chain-serve-");
  t.after(() => dir.remove());
  const first = await serve(dir.path);
  assert.equal(await first.rpc.getHealth().send(), "ok");
  const config = await first.rpc.getAccountInfo(configAddress().address, { encoding: "base64" }).send();
  assert.equal(config.value?.owner, ESCROW_PROGRAM);
  assert.equal(decodeConfig(new Uint8Array(Buffer.from(config.value!.data[0], "base64"))).jobTimeoutSeconds, 120n);
  const someone = address(generateKeypair().address);
  await first.rpc.requestAirdrop(someone, lamports(5_000_000n)).send();
  for (let i = 0; i < 50 && (await first.rpc.getBalance(someone).send()).value === 0n; i++) await new Promise((r) => setTimeout(r, 100));
  assert.equal((await first.rpc.getBalance(someone).send()).value, 5_000_000n);
  first.run.child.kill("SIGINT");
  assert.equal((await first.run.exited()).code, 0);

  const again = await serve(dir.path);
  assert.equal((await again.rpc.getBalance(someone).send()).value, 5_000_000n, "the state survived");
  again.run.child.kill("SIGINT");
  assert.equal((await again.run.exited()).code, 0);
});

test("bad arguments exit 2 saying what is wrong", async () => {
  const run = startSvc(["chain", "serve", "--port", "x"]);
  assert.equal((await run.exited()).code, 2);
  assert.match(run.stderr(), /--port must be a port number/);
  const other = startSvc(["chain", "mine"]);
  assert.equal((await other.exited()).code, 2);
  assert.match(other.stderr(), /unknown subcommand 'mine'/);
});
