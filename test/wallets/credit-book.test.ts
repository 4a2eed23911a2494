/**
 * The credit book: what it grants is covered with every change in flight counted; it learns a
 * wallet's figure only from a change that was the wallet's only one from start to end; a
 * withdrawal or a bond waits for the granted locks in flight and blocks new grants meanwhile.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { CreditBook } from "../../src/wallets/credit-book.ts";

test("an unknown wallet is granted nothing until a change alone tells its figure", () => {
  const book = new CreditBook();
  const first = book.take("w", 2);
  assert.equal(first.granted, false);
  assert.equal(book.available("w"), undefined);
  first.done(true, 12);
  assert.equal(book.available("w"), 12);
  const covered = book.take("w", 10);
  assert.equal(covered.granted, true);
  assert.equal(covered.creditsAfter, 2);
  assert.equal(book.take("w", 3).granted, false, "10 of the 12 are claimed in flight");
});

test("a result is not learnt when another change began while it was in flight", () => {
  const book = new CreditBook();
  book.take("w", 1).done(true, 20);
  const a = book.take("w", 5);
  const b = book.take("w", 5);
  // The ledger said 15 right after a; b commits later and takes 5 more: 15 must not be learnt.
  b.done(true, 10);
  a.done(true, 15);
  assert.equal(book.available("w"), 10);
});

test("a refused or failed change gives its claim back and moves nothing", () => {
  const book = new CreditBook();
  book.take("w", 1).done(true, 6);
  const refused = book.take("w", 4);
  assert.equal(book.available("w"), 2);
  refused.done(false);
  assert.equal(book.available("w"), 6);
  const giveBack = book.give("w", 3);
  assert.equal(book.available("w"), 6, "an increase counts only once committed");
  giveBack.done(false);
  assert.equal(book.available("w"), 6);
  const charged = book.give("w", 3);
  const other = book.take("w", 1);
  charged.done(true, 9);
  other.done(true);
  assert.equal(book.available("w"), 8);
});

test("a change done twice counts once", () => {
  const book = new CreditBook();
  book.take("w", 1).done(true, 10);
  const a = book.take("w", 4);
  const b = book.take("w", 1);
  a.done(true);
  a.done(true);
  b.done(false);
  assert.equal(book.available("w"), 6);
});

test("a withdrawal waits for the granted locks in flight, and none is granted until it is done", async () => {
  const book = new CreditBook();
  book.take("w", 1).done(true, 10);
  const lock = book.take("w", 4);
  assert.equal(lock.granted, true);
  let withdrawing = false;
  const withdrawal = book.takeAlone("w", 6).then((change) => ((withdrawing = true), change));
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(withdrawing, false, "the granted lock is still in flight");
  assert.equal(book.take("w", 1).granted, false, "no grant while a withdrawal waits");
  lock.done(true);
  const change = await withdrawal;
  assert.equal(change.granted, false, "the ledger decides a withdrawal");
  change.done(true);
  assert.equal(book.available("w"), -1, "none left, less the credit the take above still claims");
});

test("past its limit the book forgets the longest-idle wallets, never one with a change in flight", () => {
  const book = new CreditBook(2);
  const open = book.take("busy", 1);
  book.take("a", 1).done(true, 5);
  book.take("b", 1).done(true, 5);
  book.take("c", 1).done(true, 5);
  assert.equal(book.available("a"), undefined, "the longest-idle wallet went");
  assert.equal(book.available("c"), 5);
  open.done(true, 7);
  assert.equal(book.available("busy"), 7);
});

test("grant takes only a lock the book covers, and nothing when it cannot", () => {
  const book = new CreditBook();
  assert.equal(book.grant("w", 1), undefined);
  assert.equal(book.available("w"), undefined);
  book.take("w", 1).done(true, 5);
  assert.equal(book.grant("w", 6), undefined);
  assert.equal(book.available("w"), 5, "a refused grant claims nothing");
  const lock = book.grant("w", 4);
  assert.equal(lock?.granted, true);
  assert.equal(book.available("w"), 1);
});
