/**
 * `svc chain init` against a real chain server in its own process (`svc chain serve`), run as a
 * child process on a fresh keys dir: the committed program deployed through the upgradeable
 * loader at the keys dir's own id, its config initialized by the upgrade authority, a second run
 * that sends nothing, a run killed mid-write finished by the next, clear errors, and, after the
 * chain restarted from its checkpoint, a gateway on that chain and keys dir locking and settling
 * a paid job in the new program.
 */
import assert from "node:assert/strict";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { createSolanaRpc, type Address } from "@solana/kit";
import { loadOrCreateKeypair } from "../../src/core/keys.ts";
import {
  ESCROW_PROGRAM,
  ESCROW_PROGRAM_PATH,
  UPGRADEABLE_LOADER,
  configAddress,
  decodeConfig,
  programDataAddress,
} from "../../src/chain/escrow-program/index.ts";
import { runSvc, startSvc } from "../cli/svc-process.ts";
import { startChainServer, type ChainServer } from "../support/chain-server.ts";
import { startFaultyRpcProxy } from "../support/faulty-rpc-proxy.ts";
import { getJob } from "../../src/jobs/job-repo.ts";
import { escrowStatus } from "../support/chain-checks.ts";
import { MODEL, migratedTestDb, startTestGateway, tempDir, testWorker } from "../support/service.ts";

const COMMITTED = new Uint8Array(readFileSync(ESCROW_PROGRAM_PATH));
const PROGRAMDATA_HEADER = 45; // tag u32, slot u64, Option<upgrade authority>

const init = (url: string, keysDir: string) => ["chain", "init", "--chain-url", url, "--keys-dir", keysDir];
/** A key the command left in the keys dir (read, so nothing is created). */
const keyIn = (dir: string, name: string) => {
  assert.ok(existsSync(join(dir, `${name}.json`)), `${name}.json is in the keys dir`);
  return loadOrCreateKeypair(dir, name).then((k) => k.address);
};

/**
 * An RPC read that waits out the server's per-address rate limit: `svc chain init` writes the
 * program from this same address, and can leave its budget spent for a moment.
 */
async function read<T>(ask: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await ask();
    } catch (error) {
      if (attempt >= 5 || !/\(429\)/.test(String(error))) throw error;
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  }
}

async function account(rpc: ReturnType<typeof createSolanaRpc>, address: Address) {
  const { value } = await read(() => rpc.getAccountInfo(address, { encoding: "base64" }).send());
  return value && { ...value, bytes: new Uint8Array(Buffer.from(value.data[0], "base64")) };
}

describe("svc chain init on a fresh cluster", () => {
  let server: ChainServer;
  let rpc: ReturnType<typeof createSolanaRpc>;
  let keys: Awaited<ReturnType<typeof tempDir>>;
  let program: Address;
  before(async () => {
    server = await startChainServer();
    rpc = createSolanaRpc(server.url);
    keys = await tempDir("svc-chain-init-");
  });
  after(async () => {
    await server.close();
    await keys.remove();
  });

  test("deploys the committed program at the keys dir's id and initializes its config; a second run changes nothing", async () => {
    const first = await runSvc(init(server.url, keys.path));
    assert.equal(first.code, 0, first.stdout + first.stderr);
    assert.match(first.stdout, /Writing the program: (\d+)\/\1 chunks/, "progress ends with every chunk written");
    program = await keyIn(keys.path, "escrow-program");
    assert.notEqual(program, ESCROW_PROGRAM);
    assert.match(first.stdout, new RegExp(`Escrow program: ${program}`));

    const deployed = await account(rpc, program);
    assert.ok(deployed, "the program account exists");
    assert.equal(deployed.executable, true);
    assert.equal(deployed.owner, UPGRADEABLE_LOADER);
    const data = await account(rpc, programDataAddress(program).address);
    assert.ok(data && data.owner === UPGRADEABLE_LOADER, "its program data, under the loader");
    assert.ok(Buffer.from(data.bytes.subarray(PROGRAMDATA_HEADER)).equals(COMMITTED), "exactly the committed bytes");
    assert.equal(data.bytes[12], 1, "an upgrade authority is set");
    assert.equal(Buffer.from(data.bytes.subarray(13, 45)).toString("hex"), Buffer.from((await loadOrCreateKeypair(keys.path, "upgrade-authority")).publicKey).toString("hex"));
    assert.ok(!existsSync(join(keys.path, "escrow-program-buffer.json")), "the spent buffer's key is gone");

    const config = await account(rpc, configAddress(program).address);
    assert.ok(config && config.owner === program, "the config is the new program's");
    assert.equal(decodeConfig(config.bytes).serviceAuthority, await keyIn(keys.path, "custody"));

    const feePayer = await keyIn(keys.path, "fee-payer");
    const history = async () => (await read(() => rpc.getSignaturesForAddress(feePayer).send())).map((s) => s.signature);
    const sent = await history();
    const second = await runSvc(init(server.url, keys.path));
    assert.equal(second.code, 0, second.stdout + second.stderr);
    assert.match(second.stdout, /Nothing to do/);
    assert.doesNotMatch(second.stdout, /Writing|Created|Deployed/);
    assert.deepEqual(await history(), sent, "the second run sent no transaction");
  });

  test("after the chain restarts from its checkpoint, a gateway on it and the keys dir locks and settles a paid job in the new program", async () => {
    assert.ok(program, "the first test deployed the program");
    await server.stop();
    await server.restart();
    const gateway = await startTestGateway({ db: await migratedTestDb(), chainUrl: server.url, keysDir: keys.path, workers: [await testWorker()], credits: 50 });
    try {
      assert.equal(gateway.service.chain.program, program);
      const reply = await gateway.client.chat.completions.create({ model: MODEL, messages: [{ role: "user", content: "Hi" }], max_tokens: 8 });
      assert.ok(reply.choices[0]!.message.content);
      let job: { id: string; status: string } | undefined;
      for (let i = 0; i < 100 && job?.status !== "settled"; i++) {
        if (i > 0) await new Promise((r) => setTimeout(r, 50));
        [job] = await gateway.service.db.query<{ id: string; status: string }>("SELECT id, status FROM jobs WHERE wallet = $1", [gateway.wallet]);
      }
      assert.equal(job?.status, "settled");
      const settled = (await getJob(gateway.service.db, job.id))!;
      const escrow = await account(rpc, settled.escrowAddress as Address);
      assert.equal(escrow?.owner, program, "the job's escrow (its wallet's table) is the new program's");
      assert.equal(await escrowStatus(gateway.service, job.id), "settled");
    } finally {
      await gateway.close();
    }
  });

  test("a run killed while writing the program is finished by the next", async () => {
    const fresh = await tempDir("svc-chain-init-");
    const proxy = await startFaultyRpcProxy(server.url);
    try {
      proxy.fault = ({ method }) => (method === "sendTransaction" ? { kind: "delay", ms: 150 } : { kind: "pass" });
      const slow = startSvc(init(proxy.url, fresh.path));
      await slow.waitFor(/Writing the program: [1-9]\d*\/\d+ chunks/, 20_000);
      slow.child.kill("SIGKILL");
      await slow.exited();
      assert.doesNotMatch(slow.stdout(), /Deployed/);

      const rerun = await runSvc(init(server.url, fresh.path));
      assert.equal(rerun.code, 0, rerun.stdout + rerun.stderr);
      assert.match(rerun.stdout, /Resuming with the deploy buffer/);
      const [, already, total] = /Writing the program: (\d+)\/(\d+) chunks/.exec(rerun.stdout)!;
      assert.ok(Number(already) > 0 && Number(already) < Number(total), `the rerun found ${already} of ${total} chunks written`);
      const data = await account(rpc, programDataAddress(await keyIn(fresh.path, "escrow-program")).address);
      assert.ok(data && Buffer.from(data.bytes.subarray(PROGRAMDATA_HEADER)).equals(COMMITTED), "exactly the committed bytes");
    } finally {
      await proxy.close();
      await fresh.remove();
    }
  });

  test("clear errors: the fee payer and the service authority a chain will not fund, and an RPC that cannot be reached", async () => {
    const fresh = await tempDir("svc-chain-init-");
    const proxy = await startFaultyRpcProxy(server.url);
    try {
      proxy.fault = ({ method }) => (method === "requestAirdrop" ? { kind: "status", status: 403 } : { kind: "pass" });
      const unfunded = await runSvc(init(proxy.url, fresh.path));
      assert.equal(unfunded.code, 1);
      const feePayer = await keyIn(fresh.path, "fee-payer");
      assert.match(unfunded.stderr, new RegExp(`the fee payer ${feePayer} holds 0 SOL and this run needs about 0\\.\\d+ SOL`));
      assert.match(unfunded.stderr, new RegExp(`Send ${feePayer} at least 0\\.\\d+ SOL`));
      // The fee payer funded, the service authority, which pays for the jobs' transactions, is next.
      proxy.fault = ({ method, params }) => (method === "requestAirdrop" && params[0] !== feePayer ? { kind: "status", status: 403 } : { kind: "pass" });
      const authorityUnfunded = await runSvc(init(proxy.url, fresh.path));
      assert.equal(authorityUnfunded.code, 1);
      const authority = await keyIn(fresh.path, "custody");
      assert.match(authorityUnfunded.stderr, new RegExp(`the service authority ${authority} holds 0 SOL and a gateway needs about 1 SOL`));
    } finally {
      await proxy.close();
    }
    const closed = `http://127.0.0.1:${new URL(proxy.url).port}`;
    const unreachable = await runSvc(init(closed, fresh.path));
    assert.equal(unreachable.code, 1);
    assert.match(unreachable.stderr, new RegExp(`cannot reach the Solana RPC at ${closed}: .*ECONNREFUSED`));
    await fresh.remove();
  });
});
