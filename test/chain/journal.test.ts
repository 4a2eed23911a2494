/**
 * The chain journal on its own: a real embedded chain and a real database, and an owner that
 * only notes what the journal tells it. The journal applies each outcome once, through the owner
 * registered for the action's kind, and knows nothing else about it.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { ChainJournal, openChain, type ActionOwner, type Chain, type ChainAction } from "../../src/chain/index.ts";
import { generateKeypair } from "../../src/core/keys.ts";
import { silentLogger } from "../../src/core/logger.ts";
import { JOBS_MIGRATIONS } from "../../src/jobs/schema.ts";
import { CHAIN_MIGRATIONS } from "../../src/chain/schema.ts";
import { migrate, type Db } from "../../src/store/index.ts";
import { testDatabases } from "../support/db.ts";

const embedded = testDatabases({ sqlite: true }).filter((backend) => backend.name !== "postgres");

for (const backend of embedded) describe(`the chain journal on ${backend.name}`, () => {
  let db: Db;
  let chain: Chain;
  let journal: ChainJournal;
  const heard: string[] = [];
  const owner: ActionOwner = {
    confirmed: async (_tx, action, slot) => {
      heard.push(`confirmed ${action.subject} at ${slot > 0 ? "a slot" : slot}`);
      return { credits: action.params?.credits };
    },
    rejected: async (_tx, action, reason) => void heard.push(`rejected ${action.subject}: ${reason}`),
    rebuild: async () => undefined,
    dropped: async (_tx, action, fresh) => void heard.push(`dropped ${action.subject}${fresh ? " with a copy" : ""}`),
  };

  async function funding(credits: number): Promise<ChainAction> {
    const wallet = generateKeypair().address;
    const prepared = await chain.prepareDeposit({ wallet, credits });
    return { kind: "funding", subject: wallet, signature: prepared.signature, wire: prepared.wire, params: { credits } };
  }

  before(async () => {
    db = await backend.open({ migrations: [...JOBS_MIGRATIONS, ...CHAIN_MIGRATIONS] });
    chain = await openChain({});
    journal = new ChainJournal(db, chain, silentLogger());
    journal.register("funding", owner);
  });
  after(async () => {
    await chain.close();
    await db.close();
  });

  test("a kind has one owner", () => {
    assert.throws(() => journal.register("funding", owner), /already have an owner/);
  });

  test("a confirmed action's outcome is applied once, by its owner, and reaches the sender", async () => {
    heard.length = 0;
    const action = await funding(5);
    await journal.record(db, action);
    const sent = await journal.send(action);
    assert.ok(sent.slot >= 0);
    assert.deepEqual(sent.outcome, { credits: 5 });
    assert.deepEqual(heard, [`confirmed ${action.subject} at ${sent.slot > 0 ? "a slot" : sent.slot}`]);
    assert.equal(await journal.resumeOpen(), 0, "nothing is left open");
    assert.equal(await journal.hasAction("funding", action.subject), true);
    assert.deepEqual((await journal.actionsAbout([action.subject])).map((a) => a.state), ["confirmed"]);
    assert.equal(heard.length, 1, "resuming applied nothing again");
  });

  test("an owner whose confirmation only writes has it applied in the journal's own statement, once", async () => {
    await db.exec("CREATE TABLE noted (subject text NOT NULL, slot bigint NOT NULL)");
    journal.register("noted", {
      ...owner,
      addConfirmed: (statement, confirmed) => statement.step("noted_written", `INSERT INTO noted (subject, slot) SELECT subject, slot FROM ${confirmed}`),
    });
    const actions = await Promise.all([funding(1), funding(2)]).then((made) => made.map((a) => ({ ...a, kind: "noted" })));
    for (const action of actions) await journal.record(db, action);
    const sent = await Promise.all(actions.map((action) => journal.send(action)));
    const noted = await db.query<{ subject: string; slot: bigint }>("SELECT subject, slot FROM noted ORDER BY subject");
    assert.deepEqual(noted, actions.map((a, i) => ({ subject: a.subject, slot: BigInt(sent[i]!.slot) })).sort((a, b) => (a.subject < b.subject ? -1 : 1)));
    assert.deepEqual((await journal.actionsAbout(actions.map((a) => a.subject))).map((a) => a.state), ["confirmed", "confirmed"]);
    // One that a recovery elsewhere confirmed first: the journal's mark finds it done, and the owner's write does not run again.
    const [late] = [{ ...(await funding(3)), kind: "noted" }];
    await journal.record(db, late);
    await db.query("UPDATE chain_actions SET state = 'confirmed' WHERE signature = $1", [late.signature]);
    await journal.send(late);
    assert.equal((await db.query("SELECT 1 FROM noted WHERE subject = $1", [late.subject])).length, 0);
  });

  test("an action recorded but never sent is sent on resume; one of a kind nobody owns is refused", async () => {
    heard.length = 0;
    const action = await funding(3);
    await journal.record(db, action);
    assert.equal(await journal.resumeOpen(), 1);
    assert.equal(heard.length, 1);
    assert.match(heard[0]!, /^confirmed /);
    const orphan = { ...(await funding(1)), kind: "nobody's" };
    await journal.record(db, orphan);
    await assert.rejects(journal.send(orphan), /no owner is registered for chain actions of kind nobody's/);
    assert.deepEqual((await journal.actionsAbout([orphan.subject])).map((a) => a.state), ["sent"], "its row stays open, unapplied");
    await db.query("DELETE FROM chain_actions WHERE signature = $1", [orphan.signature]);
  });

  test("while the node runs, an action left open by a send that gave up is finished; one being sent is left alone", async () => {
    heard.length = 0;
    const mine = new ChainJournal(db, chain, silentLogger(), "node_a");
    mine.register("funding", owner);
    const abandoned = await funding(2);
    await mine.record(db, abandoned);
    // Another node's open action is not this node's to finish.
    const theirs = await funding(4);
    await new ChainJournal(db, chain, silentLogger(), "node_b").record(db, theirs);
    assert.equal(await mine.resumeStale({ nodeId: "node_a", orUnowned: false }, 60_000), 0, "not stale yet");
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(await mine.resumeStale({ nodeId: "node_a", orUnowned: false }, 20), 1);
    assert.deepEqual(heard, [`confirmed ${abandoned.subject} at a slot`]);
    assert.deepEqual((await journal.actionsAbout([theirs.subject])).map((a) => a.state), ["sent"]);

    heard.length = 0;
    const inFlight = await funding(1);
    await mine.record(db, inFlight);
    await new Promise((r) => setTimeout(r, 30));
    const sending = mine.send(inFlight);
    assert.equal(await mine.resumeStale({ nodeId: "node_a", orUnowned: false }, 20), 0, "its sender is still waiting on it");
    await sending;
    assert.equal(heard.length, 1, "applied once");
    await db.query("DELETE FROM chain_actions WHERE signature = $1", [theirs.signature]);
  });

  test("a finished action keeps no signed bytes, unless an open action of its transaction still borrows them", async () => {
    const bytesOf = async (signature: string) =>
      (await db.query<{ subject: string; bytes: number }>("SELECT subject, length(wire) AS bytes FROM chain_actions WHERE signature = $1 ORDER BY subject", [signature])).map(
        (row) => [row.subject, Number(row.bytes)],
      );
    const alone = await funding(6);
    await journal.record(db, alone);
    await journal.send(alone);
    assert.deepEqual(await bytesOf(alone.signature), [[alone.subject, 0]]);

    const shared = async (credits: number) => {
      const deposit = await funding(credits);
      const parts = ["a", "b"].map((part) => ({ ...deposit, subject: `${deposit.subject}/${part}`, shared: true }));
      await journal.recordAll(db, parts);
      return { length: deposit.wire.length, holder: parts[0]!, borrower: parts[1]! };
    };
    // The row holding the bytes finishes first: its sibling, still open, borrows them.
    const first = await shared(7);
    await journal.send(first.holder);
    assert.deepEqual(await bytesOf(first.holder.signature), [[first.holder.subject, first.length], [first.borrower.subject, 0]]);
    await journal.send(first.borrower);
    // It finishes last: nothing borrows them any more.
    const last = await shared(8);
    await journal.send(last.borrower);
    await journal.send(last.holder);
    assert.deepEqual(await bytesOf(last.holder.signature), [[last.holder.subject, 0], [last.borrower.subject, 0]]);
    assert.deepEqual((await journal.actionsAbout([first.holder, first.borrower, last.holder, last.borrower].map((a) => a.subject))).map((a) => a.state), ["confirmed", "confirmed", "confirmed", "confirmed"]);
  });

  test("the actions of one shared transaction each have a row, its bytes kept once, and each is finished from them", async () => {
    heard.length = 0;
    const node = new ChainJournal(db, chain, silentLogger(), "node_shared");
    // Given up on resume when never sent: deciding that reads the transaction's bytes for every action.
    node.register("funding", { ...owner, giveUpUnsentOnResume: true });
    const deposit = await funding(4);
    const actions = ["a", "b", "c"].map((part) => ({ ...deposit, subject: `${deposit.subject}/${part}`, shared: true }));
    await node.recordAll(db, actions);
    const rows = await db.query<{ subject: string; bytes: number }>("SELECT subject, length(wire) AS bytes FROM chain_actions WHERE signature = $1 ORDER BY subject", [deposit.signature]);
    assert.deepEqual(rows.map((row) => [row.subject, Number(row.bytes)]), actions.map((a, i) => [a.subject, i === 0 ? deposit.wire.length : 0]));
    assert.equal(await node.resumeOpen({ nodeId: "node_shared", orUnowned: false }), 3);
    assert.deepEqual([...heard].sort(), actions.map((a) => `dropped ${a.subject}`));
    assert.deepEqual((await node.actionsAbout(actions.map((a) => a.subject))).map((a) => a.state), ["dropped", "dropped", "dropped"]);
  });

  test("a database written before the table of open actions has its unfinished actions found on resume", async () => {
    heard.length = 0;
    const earlier = await backend.open();
    try {
      const before = (id: string) => CHAIN_MIGRATIONS.findIndex((m) => m.id === id);
      await migrate(earlier, [...JOBS_MIGRATIONS, ...CHAIN_MIGRATIONS.slice(0, before("chain/003_open_actions"))]);
      const [open, done] = [await funding(2), await funding(3)];
      for (const [action, state] of [[open, "sent"], [done, "confirmed"]] as const) {
        await earlier.query("INSERT INTO chain_actions (signature, kind, subject, wire, state) VALUES ($1, $2, $3, $4, $5)", [action.signature, action.kind, action.subject, action.wire, state]);
      }
      await migrate(earlier, [...JOBS_MIGRATIONS, ...CHAIN_MIGRATIONS]);
      const resumed = new ChainJournal(earlier, chain, silentLogger());
      resumed.register("funding", owner);
      assert.equal(await resumed.resumeOpen(), 1);
      assert.deepEqual(heard, [`confirmed ${open.subject} at a slot`]);
      assert.equal(await resumed.resumeOpen(), 0, "nothing is left open");
    } finally {
      await earlier.close();
    }
  });
});
