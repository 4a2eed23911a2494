/*
 * Worker stakes: records at ["stake", worker] owned by the program, the tokens in the stake pool.
 * Unstaking is two steps: a request moves stake out of the active amount (so it stops counting
 * for the higher share at once) and a withdrawal pays it out after the cooldown, which outlasts
 * the dispute and arbitration windows so a disputed job can still reach the stake.
 */
#include "escrow.h"

/* Accounts: config, worker (s), payer (w, s), stake record (w), worker's stake-token account (w),
   stake pool (w), token program, system program. Data: amount u64. */
static u64 stake(const Input *in) {
  NEED_ACCOUNTS(in, 8);
  NEED_DATA(in, 9);
  const AccountInfo *a = in->accounts;
  const Config *c;
  TRY(load_config(in, &a[0], &c));
  TRY(signer(&a[1]));
  TRY(writable(&a[3]));
  TRY(writable(&a[4]));
  TRY(writable(&a[5]));
  TRY(token_account(&a[4], &c->stake_mint, a[1].key));
  TRY(expect_key(&a[5], &c->stake_pool));
  u64 amount = read_u64(in->data + 1);
  if (amount == 0) return E_INVALID_AMOUNT;
  if (amount > token_amount(&a[4])) return E_INSUFFICIENT_FUNDS;
  u8 bump;
  Bytes seeds[3] = {{(const u8 *)"stake", 5}, {a[1].key->x, 32}, {&bump, 1}};
  TRY(canonical_address(in, &a[3], seeds, 2, &bump));
  if (*a[3].lamports == 0) {
    TRY(signer(&a[2]));
    SignerSeeds stake_signer = {seeds, 3};
    TRY(create_account(in, &(NewAccount){&a[2], &a[3], sizeof(Stake), in->program_id, &stake_signer}));
    Stake *fresh = (Stake *)a[3].data;
    fresh->tag = TAG_STAKE;
    fresh->bump = bump;
    fresh->worker = *a[1].key;
  }
  TRY(owned(in, &a[3], TAG_STAKE, sizeof(Stake)));
  Stake *s = (Stake *)a[3].data;
  if (s->active + amount < s->active) return E_OVERFLOW;
  TRY(token_transfer(in, &(Transfer){&a[4], &a[5], &a[1], amount}, NULL, 0));
  s->active += amount;
  return E_OK;
}

/* The worker's own stake record, writable. */
static u64 own_stake(const Input *in, const AccountInfo *worker, const AccountInfo *record, Stake **out) {
  TRY(signer(worker));
  TRY(writable(record));
  TRY(owned(in, record, TAG_STAKE, sizeof(Stake)));
  Stake *s = (Stake *)record->data;
  if (!key_equal(&s->worker, worker->key)) return E_WRONG_ADDRESS;
  *out = s;
  return E_OK;
}

/* Accounts: config, worker (s), stake record (w). Data: amount u64. Restarts the cooldown for
   everything still waiting. */
static u64 request_unstake(const Input *in) {
  NEED_ACCOUNTS(in, 3);
  NEED_DATA(in, 9);
  const AccountInfo *a = in->accounts;
  const Config *c;
  Stake *s;
  TRY(load_config(in, &a[0], &c));
  TRY(own_stake(in, &a[1], &a[2], &s));
  u64 amount = read_u64(in->data + 1);
  if (amount == 0) return E_INVALID_AMOUNT;
  if (amount > s->active) return E_INSUFFICIENT_FUNDS;
  if (s->unstaking + amount < s->unstaking) return E_OVERFLOW;
  s->active -= amount;
  s->unstaking += amount;
  s->unstake_requested_at = now_s();
  return E_OK;
}

/* Accounts: config, worker (s), stake record (w), worker's stake-token account (w), stake pool (w),
   vault authority, token program. Pays out everything requested once the cooldown has passed. */
static u64 withdraw_stake(const Input *in) {
  NEED_ACCOUNTS(in, 7);
  NEED_DATA(in, 1);
  const AccountInfo *a = in->accounts;
  const Config *c;
  Stake *s;
  TRY(load_config(in, &a[0], &c));
  TRY(own_stake(in, &a[1], &a[2], &s));
  TRY(writable(&a[3]));
  TRY(writable(&a[4]));
  TRY(token_account(&a[3], &c->stake_mint, a[1].key));
  TRY(expect_key(&a[4], &c->stake_pool));
  TRY(expect_key(&a[5], &c->vault_authority));
  if (s->unstaking == 0) return E_INVALID_AMOUNT;
  if (!elapsed(s->unstake_requested_at, now_s(), c->unstake_cooldown_s)) return E_TOO_EARLY;
  u64 amount = s->unstaking;
  TRY(authority_transfer(in, c, &(Transfer){&a[4], &a[3], &a[5], amount}));
  s->unstaking = 0;
  return E_OK;
}
