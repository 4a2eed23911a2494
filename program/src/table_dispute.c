/*
 * Disputes of a table's slot, as `dispute` and `resolve` do for a job escrow: the caller's bond
 * moves from the table's vault into the pool and the slot is held DISPUTED until the outcome;
 * upheld or inconclusive, the treasury pays the slot's charge back to the vault and the bond goes
 * back; rejected, the bond goes to the treasury and the slot is settled again. The other slots of
 * the table are untouched. The worker's proof hash is in the settlement's leaf, not on the chain,
 * so whether the caller's hash differs from it is the service's check.
 */
#include "escrow.h"

/* Accounts: config, service authority (s), payer (w, s), table (w), dispute (w), system program,
   the table's vault (w), escrow pool (w), vault authority, token program.
   Data: slot u8, the caller's output hash (32), bond u64. */
static u64 dispute_slot(const Input *in) {
  NEED_ACCOUNTS(in, 10);
  NEED_DATA(in, 42);
  const AccountInfo *a = in->accounts;
  const Config *c;
  Table *t;
  TRY(load_config(in, &a[0], &c));
  TRY(service_authority(c, &a[1]));
  TRY(signer(&a[2]));
  TRY(load_table(in, &a[3], &t));
  u8 index = in->data[1];
  if (index >= t->used) return E_INVALID_INSTRUCTION;
  Slot *s = slot_at(&a[3], index);
  if (s->status != ESCROW_SETTLED) return E_WRONG_STATUS;
  u64 closed_after = s->closed_after[0] | ((u64)s->closed_after[1] << 8);
  i64 now = now_s(), closed_at = t->opened_at + (i64)closed_after;
  if (closed_after == 0xffff || now < closed_at || (u64)(now - closed_at) > (u64)c->dispute_window_s) return E_WINDOW_CLOSED;
  TRY(writable(&a[6]));
  TRY(writable(&a[7]));
  TRY(expect_key(&a[6], &t->vault));
  TRY(expect_key(&a[7], &c->pool));
  TRY(expect_key(&a[8], &c->vault_authority));
  u64 bond = read_u64(in->data + 34);
  if (bond > token_amount(&a[6])) return E_INSUFFICIENT_FUNDS;
  u8 bump;
  Bytes seeds[4] = {{(const u8 *)"dispute", 7}, {a[3].key->x, 32}, {&index, 1}, {&bump, 1}};
  TRY(canonical_address(in, &a[4], seeds, 3, &bump));
  SignerSeeds dispute_signer = {seeds, 4};
  TRY(create_account(in, &(NewAccount){&a[2], &a[4], sizeof(Dispute), in->program_id, &dispute_signer}));
  Dispute *d = (Dispute *)a[4].data;
  d->tag = TAG_DISPUTE;
  d->bump = bump;
  d->slot = index;
  d->of_table = 1;
  d->escrow = *a[3].key;
  sol_memcpy_(d->caller_hash, in->data + 2, 32);
  d->opened_at = now;
  d->bond = bond;
  if (bond > 0) TRY(authority_transfer(in, c, &(Transfer){&a[6], &a[7], &a[8], bond}));
  s->status = ESCROW_DISPUTED;
  t->open++;
  return E_OK;
}

/* The open dispute (account 3) of a disputed slot of the table (account 2). */
static u64 open_slot_dispute(const Input *in, Table *t, Slot **slot, Dispute **dispute) {
  const AccountInfo *table = &in->accounts[2], *record = &in->accounts[3];
  TRY(writable(record));
  TRY(owned(in, record, TAG_DISPUTE, sizeof(Dispute)));
  Dispute *d = (Dispute *)record->data;
  if (!d->of_table || !key_equal(&d->escrow, table->key) || d->slot != in->data[1] || d->slot >= t->used) return E_WRONG_ADDRESS;
  Slot *s = slot_at(table, d->slot);
  if (s->status != ESCROW_DISPUTED || d->outcome != OUTCOME_OPEN) return E_WRONG_STATUS;
  *slot = s;
  *dispute = d;
  return E_OK;
}

/* Accounts: config, service authority (s), table (w), dispute (w), treasury (w), treasury's owner
   (s unless rejected), the table's vault (w), token program, escrow pool (w), vault authority.
   Data: slot u8, outcome u8. */
static u64 resolve_slot(const Input *in) {
  NEED_ACCOUNTS(in, 10);
  NEED_DATA(in, 3);
  const AccountInfo *a = in->accounts;
  const Config *c;
  Table *t;
  Slot *s;
  Dispute *d;
  TRY(authority_table(in, &c, &t));
  TRY(open_slot_dispute(in, t, &s, &d));
  u8 outcome = in->data[2];
  if (outcome != OUTCOME_UPHELD && outcome != OUTCOME_REJECTED && outcome != OUTCOME_INCONCLUSIVE) return E_INVALID_INSTRUCTION;
  TRY(writable(&a[4]));
  TRY(writable(&a[6]));
  TRY(writable(&a[8]));
  TRY(expect_key(&a[4], &c->treasury));
  TRY(expect_key(&a[6], &t->vault));
  TRY(expect_key(&a[8], &c->pool));
  TRY(expect_key(&a[9], &c->vault_authority));
  u64 charge = read_u64(s->amount);
  if (outcome != OUTCOME_REJECTED) {
    TRY(signer(&a[5]));
    /* The token program checks that the signer is the treasury account's owner. */
    TRY(token_transfer(in, &(Transfer){&a[4], &a[6], &a[5], charge}, NULL, 0));
    d->returned = charge;
  }
  const AccountInfo *bond_to = outcome == OUTCOME_REJECTED ? &a[4] : &a[6];
  if (d->bond > 0) TRY(authority_transfer(in, c, &(Transfer){&a[8], bond_to, &a[9], d->bond}));
  i64 now = now_s();
  d->outcome = outcome;
  d->resolved_at = now;
  s->status = outcome == OUTCOME_REJECTED ? ESCROW_SETTLED : ESCROW_REVERSED;
  t->open--;
  if (now > t->last_closed_at) t->last_closed_at = now;
  return E_OK;
}
