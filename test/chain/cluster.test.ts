/**
 * The cluster backend under the faults a real RPC provider shows, injected by a proxy between it
 * and a real chain (`svc chain serve` in its own process): lost requests and answers, 429 and 503,
 * a leader that drops a transaction, a blockhash that expires, the chain restarting mid-send.
 * Whatever happens, a deposit is credited once or not at all, and the sender is told which.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ChainTxError, openChain, type Chain } from "../../src/chain/index.ts";
import { ClusterBackend } from "../../src/chain/cluster/index.ts";
import { transactionErrorJson } from "../../src/chain/rpc/encoding.ts";
import { describeRpcTransactionError } from "../../src/chain/svm-errors.ts";
import { loadServiceKeys } from "../../src/chain/setup.ts";
import { newId } from "../../src/core/ids.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { creditsToBaseUnits } from "../../src/core/units.ts";
import { startChainServer, type ChainServer } from "../support/chain-server.ts";
import { tempDir } from "../support/service.ts";
import { until } from "../support/eventually.ts";
import { startFaultyRpcProxy, type FaultyRpcProxy } from "../support/faulty-rpc-proxy.ts";

test("a cluster's transaction errors read as the embedded chain spells them", () => {
  for (const err of ["BlockhashNotFound", "InstructionError(0, Custom(2))", "InstructionError(2, InvalidAccountData)", "InsufficientFundsForRent { account_index: 1 }", "DuplicateInstruction(3)", 'InstructionError(1, BorshIoError("bad"))']) {
    assert.equal(describeRpcTransactionError(transactionErrorJson(err)), err);
  }
});

describe("the cluster backend through a faulty RPC", () => {
  let server: ChainServer;
  let proxy: FaultyRpcProxy;
  let chain: Chain;
  before(async () => {
    // 20 ms slots: a blockhash expires after 150 of them, 3 s.
    server = await startChainServer({ slotMs: 20 });
    proxy = await startFaultyRpcProxy(server.url);
    const backend = new ClusterBackend({ url: proxy.url, pollMs: 50, rebroadcastMs: 200, retry: { retries: 8, baseDelayMs: 20, maxDelayMs: 500 } });
    chain = await openChain({ backend, keysDir: server.keysDir });
  });
  after(async () => {
    await chain.close();
    await proxy.close();
    await server.close();
  });

  const credited = (wallet: string) => chain.creditBalance(wallet);

  test("429s, 503s and a lost answer: the deposit is confirmed and credited once", async () => {
    const wallet = generateKeypair().address;
    let sends = 0;
    proxy.fault = ({ method }) => {
      if (method === "sendTransaction" && sends++ === 0) return { kind: "lose-response" };
      if (method === "getSignatureStatuses" && Math.random() < 0.5) return Math.random() < 0.5 ? { kind: "status", status: 429, retryAfterS: 0 } : { kind: "status", status: 503 };
      return { kind: "pass" };
    };
    const sent = await chain.deposit({ wallet, credits: 7 });
    proxy.fault = () => ({ kind: "pass" });
    assert.ok(sends >= 2, "the first answer to sendTransaction was lost, and it was sent again");
    assert.deepEqual(await chain.transactionStatus(sent.signature), { ok: true, slot: sent.slot });
    assert.equal(await credited(wallet), creditsToBaseUnits(7));
  });

  test("a request lost on the way is sent again; a leader that drops the transaction sees it again", async () => {
    const wallet = generateKeypair().address;
    let sends = 0;
    proxy.fault = ({ method }) => {
      if (method !== "sendTransaction") return { kind: "pass" };
      sends++;
      return sends === 1 ? { kind: "lose-request" } : sends <= 3 ? { kind: "swallow-send" } : { kind: "pass" };
    };
    await chain.deposit({ wallet, credits: 3 });
    proxy.fault = () => ({ kind: "pass" });
    assert.ok(sends >= 4, `broadcast ${sends} times`);
    assert.equal(await credited(wallet), creditsToBaseUnits(3));
  });

  test("a transaction that never reaches the chain is reported not landed once its blockhash expires", async () => {
    const wallet = generateKeypair().address;
    const prepared = await chain.prepareDeposit({ wallet, credits: 5 });
    proxy.fault = ({ method }) => (method === "sendTransaction" ? { kind: "swallow-send" } : { kind: "pass" });
    const started = Date.now();
    await assert.rejects(chain.send(prepared.wire), (e: unknown) => {
      assert.ok(e instanceof ChainTxError, String(e));
      assert.deepEqual([e.details.err, e.details.landed], ["BlockhashNotFound", false]);
      return true;
    });
    proxy.fault = () => ({ kind: "pass" });
    assert.ok(Date.now() - started >= 1_000, "it waited for the blockhash to expire");
    assert.equal(await chain.settledStatus(prepared.wire), null, "it can never land");
    assert.equal(await credited(wallet), 0n);
  });

  test("a failing transaction lands, and its error and logs read as on the embedded chain", async () => {
    const wallet = generateKeypair().address;
    await chain.deposit({ wallet, credits: 1 });
    await assert.rejects(chain.lockEscrow({ jobId: "job_01ARZ3NDEKTSV4RRFFQ69G5FAV", tier: "lite", wallet, credits: 2 }), (e: unknown) => {
      assert.ok(e instanceof ChainTxError, String(e));
      assert.equal(e.details.landed, true);
      assert.match(e.details.err, /^InstructionError\(0, Custom\(\d+\)\)$/);
      assert.ok(e.details.logs.some((line) => /failed/.test(line)), e.details.logs.join("\n"));
      return true;
    });
    assert.equal(await credited(wallet), creditsToBaseUnits(1));
  });

  test("the chain killed and restarted mid-send: every deposit is credited exactly once", async () => {
    const wallets = Array.from({ length: 6 }, () => generateKeypair().address);
    // The first three transactions execute but their answers are lost: they are being confirmed
    // when the chain dies. The last three are on their way to it. Told apart by their bytes, as
    // the sender broadcasts each one again while it waits.
    const transactions: string[] = [];
    proxy.fault = ({ method, params }) => {
      if (method !== "sendTransaction") return { kind: "pass" };
      const wire = String(params[0]);
      if (!transactions.includes(wire)) transactions.push(wire);
      return transactions.indexOf(wire) < 3 ? { kind: "lose-response" } : { kind: "delay", ms: 400 };
    };
    // Settled as they go, so a deposit that fails while the chain is down is not an unhandled rejection.
    const first = Promise.allSettled(wallets.slice(0, 3).map((wallet) => chain.deposit({ wallet, credits: 2 })));
    // Waited for, not timed: on a busy machine building and sending them can take longer than any fixed pause.
    await until(() => Promise.all(wallets.slice(0, 3).map(credited)), (balances) => balances.every((b) => b > 0n), "the first three deposits executed");
    const last = Promise.allSettled(wallets.slice(3).map((wallet) => chain.deposit({ wallet, credits: 2 })));
    await until(async () => transactions.length, (n) => n >= 6, "the last three deposits reached the proxy");
    await server.kill();
    await new Promise((r) => setTimeout(r, 300));
    await server.restart();
    const outcomes = [...(await first), ...(await last)];
    proxy.fault = () => ({ kind: "pass" });
    for (const [i, outcome] of outcomes.entries()) {
      const balance = await credited(wallets[i]!);
      if (outcome.status === "fulfilled") assert.equal(balance, creditsToBaseUnits(2), `wallet ${i} was credited once`);
      else {
        // The restarted chain may no longer know the blockhash of one it never received: it did not land, and says so.
        assert.ok(outcome.reason instanceof ChainTxError && !outcome.reason.details.landed, String(outcome.reason));
        assert.equal(balance, 0n, `wallet ${i}: not landed, nothing credited`);
      }
    }
    assert.deepEqual(outcomes.slice(0, 3).map((o) => o.status), ["fulfilled", "fulfilled", "fulfilled"], "executed before the kill: confirmed after the restart");
  });

  test("a priority fee is offered on each transaction, charged, and reported as charged", async () => {
    const priced = await openChain({ chainUrl: server.url, keysDir: server.keysDir, priorityFeeMicroLamports: 1_000n });
    try {
      const wallet = generateKeypair().address;
      await priced.deposit({ wallet, credits: 1 }); // opens the vault (its rent would blur the fee)
      const second = await priced.deposit({ wallet, credits: 1 });
      const stored = await priced.backend.getTransaction(second.signature);
      // Two signatures (fee payer, mint authority), and 1,000 micro-lamports on the default unit limit:
      // 200,000 each for mintTo and the memo, 3,000 for the Compute Budget instruction (a builtin).
      assert.equal(stored?.meta?.fee, String(2n * 5_000n + 403n));
      assert.equal(BigInt(stored!.meta!.preBalances[0]!) - BigInt(stored!.meta!.postBalances[0]!), 10_403n, "the fee payer paid exactly that");
      assert.equal(await priced.creditBalance(wallet), creditsToBaseUnits(2));
    } finally {
      await priced.close();
    }
  });

  test("many jobs' escrow records are read 100 accounts to a getMultipleAccounts, in order", async () => {
    const wallet = generateKeypair().address;
    await chain.deposit({ wallet, credits: 1_000 });
    const locked = [newId("job"), newId("job")];
    for (const jobId of locked) await chain.lockEscrow({ jobId, tier: "lite", wallet, credits: 2 });
    const jobIds = Array.from({ length: 230 }, (_, i) => (i === 7 ? locked[0]! : i === 150 ? locked[1]! : newId("job")));
    const methods: string[] = [];
    proxy.fault = ({ method }) => {
      methods.push(method);
      return { kind: "pass" };
    };
    const records = await chain.escrowRecords(jobIds);
    proxy.fault = () => ({ kind: "pass" });
    assert.deepEqual(methods, ["getMultipleAccounts", "getMultipleAccounts", "getMultipleAccounts"]);
    assert.deepEqual(records.flatMap((r, i) => (r === null ? [] : [i])), [7, 150]);
    assert.equal(records[7]!.wallet, wallet);
    assert.deepEqual(records[150], await chain.escrowRecord(locked[1]!));
  });

  test("a gateway with other keys than the chain was set up with is refused, leaving nothing behind", async () => {
    const strange = await tempDir("svc-other-keys-");
    try {
      await assert.rejects(openChain({ chainUrl: server.url, keysDir: strange.path }), /set up for other service keys.*--keys-dir/);
      const keys = await loadServiceKeys(strange.path);
      assert.equal(await chain.backend.getAccount(keys.mint.address), null, "it created no mint of its own");
      assert.equal(await chain.backend.getAccount(keys.feePayer.address), null, "nor funded its fee payer");
    } finally {
      await strange.remove();
    }
  });
});
