/*
 * Job escrows: `lock` moves a job's estimate from the wallet's vault into the escrow pool and
 * records it at ["escrow", job id]; `settle` pays the worker and the treasury from it against the
 * worker's proof and returns the rest; `refund` returns all of it. Each escrow leaves LOCKED once.
 */
#include "escrow.h"

static u64 valid_job_id(const u8 *id, u64 len) {
  if (len == 0 || len > MAX_JOB_ID) return E_INVALID_JOB_ID;
  for (u64 i = 0; i < len; i++)
    if (id[i] < 0x21 || id[i] > 0x7e) return E_INVALID_JOB_ID;
  return E_OK;
}

/* Accounts: config, service authority (s), payer (w, s), escrow (w), vault (w), escrow pool (w),
   vault authority, token program, system program.
   Data: wallet (32), amount u64, tier u8, vault bump u8, job id length u8, job id. */
static u64 lock(const Input *in) {
  NEED_ACCOUNTS(in, 9);
  if (in->data_len < 44 || in->data_len != 44 + (u64)in->data[43]) return E_INVALID_INSTRUCTION;
  const AccountInfo *a = in->accounts;
  const Config *c;
  TRY(load_config(in, &a[0], &c));
  TRY(service_authority(c, &a[1]));
  TRY(signer(&a[2]));
  TRY(writable(&a[3]));
  TRY(writable(&a[4]));
  TRY(writable(&a[5]));
  TRY(expect_key(&a[5], &c->pool));
  TRY(expect_key(&a[6], &c->vault_authority));
  const u8 *d = in->data;
  Pubkey wallet;
  sol_memcpy_(&wallet, d + 1, 32);
  u64 amount = read_u64(d + 33);
  const u8 *job_id = d + 44;
  u64 job_id_len = d[43];
  TRY(valid_job_id(job_id, job_id_len));
  TRY(wallet_vault(in, c, &a[4], &wallet, d[42]));
  if (amount == 0) return E_INVALID_AMOUNT;
  if (amount > token_amount(&a[4])) return E_INSUFFICIENT_FUNDS;
  u8 bump;
  Bytes seeds[3] = {{(const u8 *)"escrow", 6}, {job_id, job_id_len}, {&bump, 1}};
  TRY(canonical_address(in, &a[3], seeds, 2, &bump));
  SignerSeeds escrow_signer = {seeds, 3};
  TRY(create_account(in, &(NewAccount){&a[2], &a[3], sizeof(Escrow), in->program_id, &escrow_signer}));
  TRY(authority_transfer(in, c, &(Transfer){&a[4], &a[5], &a[6], amount}));
  Escrow *e = (Escrow *)a[3].data;
  e->tag = TAG_ESCROW;
  e->status = ESCROW_LOCKED;
  e->bump = bump;
  e->tier = d[41];
  e->job_id_len = (u8)job_id_len;
  sol_memcpy_(e->job_id, job_id, job_id_len);
  e->wallet = wallet;
  e->vault = *a[4].key;
  e->amount_locked = amount;
  e->locked_at = now_s();
  return E_OK;
}

/* A LOCKED escrow of ours; `accounts` are the escrow, the escrow pool and the escrow's vault. */
static u64 locked_escrow(const Input *in, const Config *c, const AccountInfo *accounts, Escrow **out) {
  const AccountInfo *escrow = &accounts[0], *pool = &accounts[1], *vault = &accounts[2];
  TRY(writable(escrow));
  TRY(writable(pool));
  TRY(writable(vault));
  TRY(owned(in, escrow, TAG_ESCROW, sizeof(Escrow)));
  Escrow *e = (Escrow *)escrow->data;
  if (e->status != ESCROW_LOCKED) return E_WRONG_STATUS;
  TRY(expect_key(pool, &c->pool));
  TRY(expect_key(vault, &e->vault));
  *out = e;
  return E_OK;
}

/* Whether `worker` has at least the minimum active stake. `a` must be its stake address, which
   may not exist yet (then it is unstaked). */
static u64 worker_staked(const Input *in, const Config *c, const AccountInfo *a, const Pubkey *worker, bool *staked) {
  u8 bump;
  const Bytes seeds[2] = {{(const u8 *)"stake", 5}, {worker->x, 32}};
  TRY(canonical_address(in, a, seeds, 2, &bump));
  *staked = false;
  if (!key_equal(a->owner, in->program_id)) return E_OK;
  TRY(owned(in, a, TAG_STAKE, sizeof(Stake)));
  const Stake *s = (const Stake *)a->data;
  *staked = s->status == 0 && s->active >= c->min_active_stake;
  return E_OK;
}

/* Accounts: config, service authority (s), escrow (w), escrow pool (w), vault (w), worker's USDC
   token account (w), treasury (w), worker's stake address, vault authority, instructions sysvar,
   token program. Data: charge u64, worker (32), proof hash (32). */
static u64 settle(const Input *in) {
  NEED_ACCOUNTS(in, 11);
  NEED_DATA(in, 73);
  const AccountInfo *a = in->accounts;
  const Config *c;
  Escrow *e;
  TRY(load_config(in, &a[0], &c));
  TRY(service_authority(c, &a[1]));
  TRY(locked_escrow(in, c, &a[2], &e));
  Pubkey worker;
  sol_memcpy_(&worker, in->data + 9, 32);
  const u8 *proof_hash = in->data + 41;
  u64 charge = read_u64(in->data + 1);
  if (charge > e->amount_locked) return E_CHARGE_EXCEEDS_LOCK;
  TRY(writable(&a[5]));
  TRY(writable(&a[6]));
  TRY(token_account(&a[5], &c->usdc_mint, &worker));
  TRY(expect_key(&a[6], &c->treasury));
  TRY(expect_key(&a[8], &c->vault_authority));
  bool staked;
  TRY(worker_staked(in, c, &a[7], &worker, &staked));
  u8 message[MAX_JOB_ID + 8 + 64];
  u64 message_len = proof_message(e, proof_hash, message);
  TRY(check_proof(&a[9], &worker, message, message_len));
  u64 worker_paid = share_of(charge, staked ? c->staked_worker_share_bps : c->worker_share_bps);
  u64 treasury_paid = charge - worker_paid;
  u64 returned = e->amount_locked - charge;
  TRY(authority_transfer(in, c, &(Transfer){&a[3], &a[5], &a[8], worker_paid}));
  TRY(authority_transfer(in, c, &(Transfer){&a[3], &a[6], &a[8], treasury_paid}));
  TRY(authority_transfer(in, c, &(Transfer){&a[3], &a[4], &a[8], returned}));
  e->status = ESCROW_SETTLED;
  e->worker_staked = staked;
  e->worker = worker;
  sol_memcpy_(e->proof_hash, proof_hash, 32);
  e->charge = charge;
  e->worker_paid = worker_paid;
  e->treasury_paid = treasury_paid;
  e->returned = returned;
  e->closed_at = now_s();
  return E_OK;
}

/* Accounts: config, escrow (w), escrow pool (w), vault (w), vault authority, token program, caller.
   The service authority (signing as the caller) may refund at any time; anyone may once the job
   is older than the job timeout on the chain's clock. */
static u64 refund(const Input *in) {
  NEED_ACCOUNTS(in, 7);
  NEED_DATA(in, 1);
  const AccountInfo *a = in->accounts;
  const Config *c;
  Escrow *e;
  TRY(load_config(in, &a[0], &c));
  TRY(locked_escrow(in, c, &a[1], &e));
  TRY(expect_key(&a[4], &c->vault_authority));
  i64 now = now_s();
  bool by_authority = a[6].is_signer && key_equal(a[6].key, &c->service_authority);
  if (!by_authority && !(now > e->locked_at && (u64)(now - e->locked_at) > (u64)c->job_timeout_s)) return E_TOO_EARLY;
  TRY(authority_transfer(in, c, &(Transfer){&a[2], &a[3], &a[4], e->amount_locked}));
  e->status = ESCROW_REFUNDED;
  e->returned = e->amount_locked;
  e->closed_at = now;
  return E_OK;
}

/* Accounts: config, service authority (s), escrow (w), rent destination (w). A closed escrow
   (settled, refunded, or reversed by a dispute) whose dispute window has passed is deleted and its
   rent returned: a job's record is only needed while its outcome can still change. The
   transactions that locked and settled it stay on the chain for anyone to check. */
static u64 close_escrow(const Input *in) {
  NEED_ACCOUNTS(in, 4);
  NEED_DATA(in, 1);
  const AccountInfo *a = in->accounts;
  const Config *c;
  TRY(load_config(in, &a[0], &c));
  TRY(service_authority(c, &a[1]));
  TRY(writable(&a[2]));
  TRY(writable(&a[3]));
  TRY(owned(in, &a[2], TAG_ESCROW, sizeof(Escrow)));
  if (key_equal(a[2].key, a[3].key)) return E_WRONG_ADDRESS;
  Escrow *e = (Escrow *)a[2].data;
  if (e->status != ESCROW_SETTLED && e->status != ESCROW_REFUNDED && e->status != ESCROW_REVERSED) return E_WRONG_STATUS;
  if (!elapsed(e->closed_at, now_s(), c->dispute_window_s + 1)) return E_WINDOW_OPEN;
  u64 rent = *a[2].lamports;
  if (*a[3].lamports + rent < *a[3].lamports) return E_OVERFLOW;
  *a[3].lamports += rent;
  *a[2].lamports = 0;
  sol_memset_(a[2].data, 0, a[2].data_len);
  return E_OK;
}
