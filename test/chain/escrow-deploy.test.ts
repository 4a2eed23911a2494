/**
 * The escrow program is part of the embedded chain: deployed at its fixed id from the committed
 * bytes, its config initialized under the service's rules by a logged transaction, both still
 * there after a clean restart and after kill -9 (from the log and from a checkpoint), added to a
 * data dir written before they existed, and refused when the committed bytes changed under a
 * data dir. Anyone sees the program through the JSON-RPC server.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Writable } from "node:stream";
import { test } from "node:test";
import { createSolanaRpc, type Address } from "@solana/kit";
import { openLiteSvmBackend, type LiteSvmBackend, openChain, startChainRpc, type Chain } from "../../src/chain/index.ts";
import { addressBytes } from "../../src/chain/addresses.ts";
import {
  ESCROW_PROGRAM,
  ESCROW_PROGRAM_PATH,
  UPGRADEABLE_LOADER,
  configAddress,
  decodeConfig,
  deriveAddress,
  escrowProgramImage,
} from "../../src/chain/escrow-program/index.ts";
import { createLogger } from "../../src/core/logger.ts";
import { MIN_ACTIVE_STAKE, STAKED_WORKER_SHARE_BPS, WORKER_SHARE_BPS } from "../../src/core/payout.ts";
import { DISPUTE_WINDOW_MS, JOB_TIMEOUT_MS } from "../../src/core/index.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { newId } from "../../src/core/ids.ts";
import { programDigest } from "../../src/chain/programs.ts";
import { tempDir } from "../support/service.ts";

const COMMITTED = new Uint8Array(readFileSync(ESCROW_PROGRAM_PATH));
/** UpgradeableLoaderState::ProgramData: tag u32, slot u64, Option<authority>; the ELF follows. */
const PROGRAMDATA_HEADER = 45;

/** A logger whose records the test reads back. */
function recordingLogger() {
  const messages: string[] = [];
  const destination = new Writable({
    write(chunk, _encoding, done) {
      for (const line of String(chunk).split("\n")) if (line) messages.push((JSON.parse(line) as { msg: string }).msg);
      done();
    },
  });
  return { logger: createLogger({ format: "json", level: "info", destination }), messages };
}

async function open(dir: string, options: { programs?: []; messages?: string[] } = {}): Promise<{ chain: Chain; backend: LiteSvmBackend }> {
  const backend = await openLiteSvmBackend({ dataDir: join(dir, "chain"), ...(options.programs ? { programs: options.programs } : {}) });
  const { logger, messages } = recordingLogger();
  const chain = await openChain({ dataDir: dir, backend, logger });
  options.messages?.push(...messages);
  return { chain, backend };
}

/** The program as the chain holds it: executable, under the upgradeable loader, with exactly the committed ELF. */
async function assertProgramDeployed(chain: Chain): Promise<void> {
  const program = await chain.backend.getAccount(ESCROW_PROGRAM);
  assert.ok(program, "the program account exists");
  assert.equal(program.executable, true);
  assert.equal(program.owner, UPGRADEABLE_LOADER);
  const programData = deriveAddress([addressBytes(ESCROW_PROGRAM)], UPGRADEABLE_LOADER).address;
  assert.deepEqual(program.data.subarray(4, 36), addressBytes(programData), "the program names its program data");
  const data = await chain.backend.getAccount(programData);
  assert.ok(data, "the program data account exists");
  assert.equal(data.data[12], 0, "no upgrade authority");
  assert.ok(Buffer.from(data.data.subarray(PROGRAMDATA_HEADER)).equals(COMMITTED), "exactly the committed bytes");
}

/** The config decodes to the service's keys and rules, taken from where the service keeps them. */
async function assertConfig(chain: Chain): Promise<Uint8Array> {
  const account = await chain.backend.getAccount(configAddress().address);
  assert.ok(account, "the config account exists");
  assert.equal(account.owner, ESCROW_PROGRAM);
  const config = decodeConfig(account.data);
  assert.equal(config.serviceAuthority, chain.serviceAuthority);
  assert.equal(config.treasury, chain.treasuryAddress);
  assert.equal(config.usdcMint, chain.mint);
  assert.equal(config.stakeMint, chain.nativeMint);
  assert.equal(config.workerShareBps, Number(WORKER_SHARE_BPS));
  assert.equal(config.stakedWorkerShareBps, Number(STAKED_WORKER_SHARE_BPS));
  assert.equal(WORKER_SHARE_BPS, 7_500n);
  assert.equal(STAKED_WORKER_SHARE_BPS, 8_500n);
  assert.equal(config.minActiveStake, MIN_ACTIVE_STAKE);
  assert.equal(config.jobTimeoutSeconds, BigInt(JOB_TIMEOUT_MS / 1000));
  assert.equal(config.disputeWindowSeconds, BigInt(DISPUTE_WINDOW_MS / 1000));
  assert.equal(config.disputeWindowSeconds, 60n, "the spec's 60-second dispute window");
  return account.data;
}

async function logLength(backend: LiteSvmBackend): Promise<number> {
  return (await backend.history()).length;
}

test("a fresh chain holds the committed program and its config; a clean restart finds both and sends nothing", async (t) => {
  const dir = await tempDir("svc-deploy-");
  t.after(() => dir.remove());
  const messages: string[] = [];
  const first = await open(dir.path, { messages });
  await assertProgramDeployed(first.chain);
  const config = await assertConfig(first.chain);
  assert.deepEqual(messages, ["escrow program deployed and its config initialized"]);
  const records = await logLength(first.backend);
  await first.chain.close();

  const restarted: string[] = [];
  const second = await open(dir.path, { messages: restarted });
  await assertProgramDeployed(second.chain);
  assert.deepEqual(await assertConfig(second.chain), config, "the same config, byte for byte");
  assert.equal(await logLength(second.backend), records, "nothing sent again");
  assert.deepEqual(restarted, ["escrow program deployed, config in place"], "one line naming the program");
  await second.chain.close();
});

/** Opens the chain in a child process and kills it with SIGKILL once its setup is durable. */
async function openAndKill(dir: string, checkpointEvery: number): Promise<void> {
  const fixture = new URL("./fixtures/open-and-wait.ts", import.meta.url).pathname;
  const child = spawn(process.execPath, ["--import", "tsx", fixture, dir, String(checkpointEvery)], { stdio: ["ignore", "pipe", "inherit"] });
  const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on("exit", (_code, signal) => resolve(signal)));
  let out = "";
  for await (const chunk of child.stdout) {
    out += String(chunk);
    if (out.includes("ready")) break;
  }
  assert.match(out, /ready/, "the child finished setup");
  child.kill("SIGKILL");
  assert.equal(await exited, "SIGKILL");
}

for (const [mode, checkpointEvery] of [["the log", 1_000_000], ["a checkpoint", 1]] as const) {
  test(`after kill -9, reopening from ${mode} has the program and the config`, async (t) => {
    const dir = await tempDir("svc-deploy-kill-");
    t.after(() => dir.remove());
    await openAndKill(dir.path, checkpointEvery);
    assert.equal(existsSync(join(dir.path, "chain", "checkpoint")), mode === "a checkpoint", "reopening starts where this test means it to");
    const messages: string[] = [];
    const { chain } = await open(dir.path, { messages });
    await assertProgramDeployed(chain);
    await assertConfig(chain);
    assert.deepEqual(messages, ["escrow program deployed, config in place"], "the config came back, not initialized again");
    await chain.close();
  });
}

test("a data dir written before the program was part of the chain gets it and its config on start; a chain without it is refused", async (t) => {
  const dir = await tempDir("svc-deploy-old-");
  t.after(() => dir.remove());
  const someone = generateKeypair().address;
  const old = await openLiteSvmBackend({ dataDir: join(dir.path, "chain"), programs: [] });
  assert.equal(await old.getAccount(ESCROW_PROGRAM), null, "the old shape: no program");
  await old.requestAirdrop(someone, 7_000_000n);
  await assert.rejects(openChain({ dataDir: dir.path, backend: old }), /escrow program SvcEscrow1+ is not deployed on this chain: deploy program\/escrow\.so/);

  const messages: string[] = [];
  const upgraded = await open(dir.path, { messages });
  await assertProgramDeployed(upgraded.chain);
  await assertConfig(upgraded.chain);
  assert.equal((await upgraded.chain.backend.getAccount(someone))?.lamports, 7_000_000n, "what was there stays");
  assert.deepEqual(messages, ["escrow program deployed and its config initialized"]);
  await upgraded.chain.close();

  const again = await open(dir.path);
  await assertConfig(again.chain);
  await again.chain.close();
});

/** The committed program with one byte more: other bytes, as a rebuilt program would be. */
function otherBytes() {
  const image = escrowProgramImage();
  return { ...image, bytes: Uint8Array.of(...image.bytes, 0) };
}

test("other program bytes with transactions to replay are refused, saying to stop the old version cleanly first", async (t) => {
  const dir = await tempDir("svc-deploy-changed-");
  t.after(() => dir.remove());
  await openAndKill(dir.path, 1_000_000); // killed: its setup transactions are in the log, past any checkpoint
  await assert.rejects(
    openLiteSvmBackend({ dataDir: join(dir.path, "chain"), programs: [otherBytes()] }),
    /ran the escrow program SvcEscrow1+ as sha256:[0-9a-f]{64}, but this build carries sha256:[0-9a-f]{64}, and its log holds transactions since its last checkpoint.*stop it cleanly.*new data dir/,
  );
  const reopened = await open(dir.path);
  await assertProgramDeployed(reopened.chain);
  await reopened.chain.close();
});

test("other program bytes on a cleanly stopped chain replace the old ones: its state stays, new transactions run the new bytes", async (t) => {
  const dir = await tempDir("svc-deploy-upgrade-");
  t.after(() => dir.remove());
  const wallet = generateKeypair().address;
  const { chain } = await open(dir.path);
  await chain.deposit({ wallet, credits: 7 });
  await chain.close(); // a clean stop checkpoints: nothing left to replay

  const upgraded = await openLiteSvmBackend({ dataDir: join(dir.path, "chain"), programs: [otherBytes()] });
  const program = await upgraded.getAccount(ESCROW_PROGRAM);
  assert.ok(program?.executable);
  assert.match(readFileSync(join(dir.path, "chain", "programs"), "utf8"), new RegExp(programDigest(otherBytes().bytes)), "the note names the new bytes");
  const again = await openChain({ dataDir: dir.path, backend: upgraded });
  assert.equal(await again.creditBalance(wallet), creditsToBaseUnits(7), "what ran under the old bytes is still there");
  await again.lockEscrow({ jobId: newId("job"), tier: "lite", wallet, credits: 2 });
  assert.equal(await again.creditBalance(wallet), creditsToBaseUnits(5), "the new bytes run");
  await again.close();
});

test("getAccountInfo of the program id over kit's RPC client answers executable, owned by the loader", async (t) => {
  const chain = await openChain({ slotMs: 100 });
  const server = await startChainRpc({ chain, port: 0 });
  t.after(async () => {
    await server.close();
    await chain.close();
  });
  const rpc = createSolanaRpc(server.url);
  const { value } = await rpc.getAccountInfo(ESCROW_PROGRAM, { encoding: "base64" }).send();
  assert.ok(value, "the program account is there");
  assert.equal(value.executable, true);
  assert.equal(value.owner, UPGRADEABLE_LOADER as Address);
  const { value: config } = await rpc.getAccountInfo(configAddress().address, { encoding: "base64" }).send();
  assert.ok(config);
  assert.equal(decodeConfig(Buffer.from(config.data[0], "base64")).serviceAuthority, chain.serviceAuthority);
});
