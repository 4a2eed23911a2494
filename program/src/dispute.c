/*
 * Disputes and slashing. A caller who received other text than the worker's proof names asks the
 * service to `dispute` within the dispute window after settlement; the program records the
 * caller's hash in a dispute record at ["dispute", job id], moves the caller's bond from its vault
 * into the pool and holds the escrow DISPUTED. The service arbitrates off-chain (re-execution on
 * other workers) and records the outcome with `resolve`: upheld or inconclusive, the treasury pays
 * the whole charge back into the caller's vault (the treasury's owner signs) and the bond goes
 * back with it; rejected, the escrow is settled again and the bond goes to the treasury, which ran
 * the re-executions. `slash` moves a worker's stake into the treasury's stake-token account, for
 * an upheld dispute or a failed audit.
 */
#include "escrow.h"

/* Accounts: config, service authority (s), payer (w, s), escrow (w), dispute (w), system program,
   the escrow's vault (w), escrow pool (w), vault authority, token program.
   Data: the caller's output hash (32), bond u64. */
static u64 dispute(const Input *in) {
  NEED_ACCOUNTS(in, 10);
  NEED_DATA(in, 41);
  const AccountInfo *a = in->accounts;
  const Config *c;
  TRY(load_config(in, &a[0], &c));
  TRY(service_authority(c, &a[1]));
  TRY(signer(&a[2]));
  TRY(writable(&a[3]));
  TRY(owned(in, &a[3], TAG_ESCROW, sizeof(Escrow)));
  Escrow *e = (Escrow *)a[3].data;
  if (e->status != ESCROW_SETTLED) return E_WRONG_STATUS;
  i64 now = now_s();
  if (now < e->closed_at || (u64)(now - e->closed_at) > (u64)c->dispute_window_s) return E_WINDOW_CLOSED;
  const u8 *caller_hash = in->data + 1;
  if (bytes_equal(caller_hash, e->proof_hash, 32)) return E_SAME_HASH;
  TRY(writable(&a[6]));
  TRY(writable(&a[7]));
  TRY(expect_key(&a[6], &e->vault));
  TRY(expect_key(&a[7], &c->pool));
  TRY(expect_key(&a[8], &c->vault_authority));
  u64 bond = read_u64(in->data + 33);
  if (bond > token_amount(&a[6])) return E_INSUFFICIENT_FUNDS;
  u8 bump;
  Bytes seeds[3] = {{(const u8 *)"dispute", 7}, {e->job_id, e->job_id_len}, {&bump, 1}};
  TRY(canonical_address(in, &a[4], seeds, 2, &bump));
  SignerSeeds dispute_signer = {seeds, 3};
  TRY(create_account(in, &(NewAccount){&a[2], &a[4], sizeof(Dispute), in->program_id, &dispute_signer}));
  Dispute *d = (Dispute *)a[4].data;
  d->tag = TAG_DISPUTE;
  d->bump = bump;
  d->escrow = *a[3].key;
  sol_memcpy_(d->caller_hash, caller_hash, 32);
  d->opened_at = now;
  d->bond = bond;
  if (bond > 0) TRY(authority_transfer(in, c, &(Transfer){&a[6], &a[7], &a[8], bond}));
  e->status = ESCROW_DISPUTED;
  return E_OK;
}

/* Accounts: config, service authority (s), escrow (w), dispute (w), treasury (w), treasury's
   owner (s unless rejected), the escrow's vault (w), token program, escrow pool (w), vault
   authority. Data: outcome u8. */
static u64 resolve(const Input *in) {
  NEED_ACCOUNTS(in, 10);
  NEED_DATA(in, 2);
  const AccountInfo *a = in->accounts;
  const Config *c;
  TRY(load_config(in, &a[0], &c));
  TRY(service_authority(c, &a[1]));
  TRY(writable(&a[2]));
  TRY(writable(&a[3]));
  TRY(owned(in, &a[2], TAG_ESCROW, sizeof(Escrow)));
  TRY(owned(in, &a[3], TAG_DISPUTE, sizeof(Dispute)));
  Escrow *e = (Escrow *)a[2].data;
  Dispute *d = (Dispute *)a[3].data;
  if (!key_equal(&d->escrow, a[2].key)) return E_WRONG_ADDRESS;
  if (e->status != ESCROW_DISPUTED || d->outcome != OUTCOME_OPEN) return E_WRONG_STATUS;
  u8 outcome = in->data[1];
  if (outcome != OUTCOME_UPHELD && outcome != OUTCOME_REJECTED && outcome != OUTCOME_INCONCLUSIVE) return E_INVALID_INSTRUCTION;
  TRY(writable(&a[4]));
  TRY(writable(&a[6]));
  TRY(writable(&a[8]));
  TRY(expect_key(&a[4], &c->treasury));
  TRY(expect_key(&a[6], &e->vault));
  TRY(expect_key(&a[8], &c->pool));
  TRY(expect_key(&a[9], &c->vault_authority));
  if (outcome != OUTCOME_REJECTED) {
    TRY(signer(&a[5]));
    /* The token program checks that the signer is the treasury account's owner. */
    TRY(token_transfer(in, &(Transfer){&a[4], &a[6], &a[5], e->charge}, NULL, 0));
    d->returned = e->charge;
  }
  /* A lost dispute's bond pays for the re-executions; any other outcome gives it back. */
  const AccountInfo *bond_to = outcome == OUTCOME_REJECTED ? &a[4] : &a[6];
  if (d->bond > 0) TRY(authority_transfer(in, c, &(Transfer){&a[8], bond_to, &a[9], d->bond}));
  d->outcome = outcome;
  d->resolved_at = now_s();
  e->status = outcome == OUTCOME_REJECTED ? ESCROW_SETTLED : ESCROW_REVERSED;
  return E_OK;
}

/* Accounts: config, service authority (s), stake record (w), stake pool (w), destination stake-token
   account (w), treasury, vault authority, token program. Data: amount u64. The destination must
   belong to whoever owns the treasury: slashed stake goes to the protocol. Active stake goes first. */
static u64 slash(const Input *in) {
  NEED_ACCOUNTS(in, 8);
  NEED_DATA(in, 9);
  const AccountInfo *a = in->accounts;
  const Config *c;
  TRY(load_config(in, &a[0], &c));
  TRY(service_authority(c, &a[1]));
  TRY(writable(&a[2]));
  TRY(writable(&a[3]));
  TRY(writable(&a[4]));
  TRY(owned(in, &a[2], TAG_STAKE, sizeof(Stake)));
  TRY(expect_key(&a[3], &c->stake_pool));
  TRY(expect_key(&a[5], &c->treasury));
  TRY(token_account(&a[5], &c->usdc_mint, (const Pubkey *)(a[5].data + TOKEN_OWNER_AT)));
  TRY(token_account(&a[4], &c->stake_mint, (const Pubkey *)(a[5].data + TOKEN_OWNER_AT)));
  TRY(expect_key(&a[6], &c->vault_authority));
  Stake *s = (Stake *)a[2].data;
  u64 amount = read_u64(in->data + 1);
  if (amount == 0) return E_INVALID_AMOUNT;
  if (s->active + s->unstaking < s->active || amount > s->active + s->unstaking) return E_INSUFFICIENT_FUNDS;
  if (s->slashed_total + amount < s->slashed_total) return E_OVERFLOW;
  TRY(authority_transfer(in, c, &(Transfer){&a[3], &a[4], &a[6], amount}));
  u64 from_active = amount < s->active ? amount : s->active;
  s->active -= from_active;
  s->unstaking -= amount - from_active;
  s->slashed_total += amount;
  s->last_slashed_at = now_s();
  s->status = STAKE_SLASHED;
  return E_OK;
}
