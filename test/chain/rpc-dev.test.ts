/**
 * `svc dev` as a real process serves its chain over Solana JSON-RPC: the banner names the URL, and
 * kit's client reads there the dev wallet's deposit the service made at start.
 */
import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import { join } from "node:path";
import { after, test } from "node:test";
import { createSolanaRpc, type Address } from "@solana/kit";
import { vaultAddress } from "../../src/chain/escrow-program/index.ts";
import { loadOrCreateKeypair } from "../../src/core/keys.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { tempDir } from "../support/service.ts";

const BIN = join(import.meta.dirname, "..", "..", "bin", "svc.js");
const dir = await tempDir("svc-rpc-dev-");
let child: ChildProcess | undefined;
after(async () => {
  if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  await dir.remove();
});

test("svc dev prints `Solana RPC: http://...` and kit's client reads the service's chain there", { timeout: 60_000 }, async () => {
  child = spawn(process.execPath, [BIN, "dev", "--data-dir", dir.path, "--port", "0", "--rpc-port", "0", "--credits", "25"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, LOG_LEVEL: "warn", DATABASE_URL: "" },
  });
  let out = "";
  child.stdout!.on("data", (d: Buffer) => (out += d.toString()));
  child.stderr!.on("data", (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child!.once("exit", (code) => resolve(code)));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`svc dev did not start:\n${out}`)), 45_000);
    void exited.then((code) => reject(new Error(`svc dev exited with ${code}:\n${out}`)));
    const poll = setInterval(() => {
      if (!out.includes("Press Ctrl-C")) return;
      clearInterval(poll);
      clearTimeout(timer);
      resolve();
    }, 20);
  });

  const url = /^Solana RPC: (http:\/\/127\.0\.0\.1:\d+)$/m.exec(out)?.[1];
  assert.ok(url, `a Solana RPC line in:\n${out}`);
  const rpc = createSolanaRpc(url);
  assert.equal(await rpc.getHealth().send(), "ok");

  const keys = join(dir.path, "keys");
  const wallet = (await loadOrCreateKeypair(keys, "dev-wallet")).address;
  const vault = vaultAddress(wallet as Address).address;
  const { value } = await rpc.getTokenAccountBalance(vault).send();
  assert.equal(value.amount, String(creditsToBaseUnits(25)), "the deposit the service made at start");

  child.kill("SIGINT");
  assert.equal(await exited, 0, "a clean stop closes the RPC server too");
});
