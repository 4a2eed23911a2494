/* `initialize`: creates the config and the two pools, and fixes the rules every job runs by. */
#include "escrow.h"

/* Accounts: config (w), service authority (s), payer (w, s), treasury token account, USDC mint,
   stake mint, escrow pool (w), stake pool (w), vault authority, token program, system program,
   this program's account, its program data, then the upgrade authority (s) if not one above.
   Data: min active stake u64, job timeout s i64, dispute window s i64, unstake cooldown s i64,
   worker share bps u16, staked worker share bps u16. */
static u64 check_rules(const u8 *d, Config *c) {
  c->min_active_stake = read_u64(d);
  c->job_timeout_s = (i64)read_u64(d + 8);
  c->dispute_window_s = (i64)read_u64(d + 16);
  c->unstake_cooldown_s = (i64)read_u64(d + 24);
  c->worker_share_bps = read_u16(d + 32);
  c->staked_worker_share_bps = read_u16(d + 34);
  if (c->job_timeout_s <= 0 || c->dispute_window_s < 0 || c->dispute_window_s > (1LL << 40)) return E_INVALID_CONFIG;
  if (c->unstake_cooldown_s <= c->dispute_window_s + ARBITRATION_WINDOW_S) return E_INVALID_CONFIG;
  if (c->staked_worker_share_bps > BPS_DENOMINATOR || c->worker_share_bps > c->staked_worker_share_bps)
    return E_INVALID_CONFIG;
  return E_OK;
}

/* The escrow pool (`stake` false) or the stake pool, at its canonical program address. */
/*
 * The first `initialize` fixes the configuration, so only whoever may upgrade the program may send
 * it: the upgradeable loader's program data names that authority, which must sign. A program
 * without one (made immutable, or loaded by a test chain) cannot have been deployed by someone
 * racing its deployer, so any signer may initialize it.
 */
static u64 upgrade_authority_signed(const Input *in) {
  const AccountInfo *program = &in->accounts[11], *data = &in->accounts[12];
  TRY(expect_key(program, in->program_id));
  if (!key_equal(program->owner, &UPGRADEABLE_LOADER) || program->data_len < 36) return E_WRONG_OWNER;
  if (!key_equal(data->key, (const Pubkey *)(program->data + 4))) return E_WRONG_ADDRESS;
  if (!key_equal(data->owner, &UPGRADEABLE_LOADER) || data->data_len < 45) return E_WRONG_OWNER;
  if (data->data[12] == 0) return E_OK; /* Option<authority> is None */
  for (u64 i = 0; i < in->account_count; i++)
    if (in->accounts[i].is_signer && key_equal(in->accounts[i].key, (const Pubkey *)(data->data + 13))) return E_OK;
  return E_MISSING_SIGNER;
}

static u64 create_pool(const Input *in, Config *c, bool stake) {
  const AccountInfo *pool = &in->accounts[stake ? 7 : 6];
  u8 *bump = stake ? &c->stake_pool_bump : &c->pool_bump;
  Bytes seeds[2] = {{(const u8 *)(stake ? "stake_pool" : "pool"), stake ? 10 : 4}, {bump, 1}};
  TRY(canonical_address(in, pool, seeds, 1, bump));
  SignerSeeds signer = {seeds, 2};
  NewAccount n = {&in->accounts[2], pool, 0, NULL, &signer};
  return create_token_account(in, &n, &in->accounts[stake ? 5 : 4], &c->vault_authority);
}

static u64 initialize(const Input *in) {
  NEED_ACCOUNTS(in, 13);
  NEED_DATA(in, 37);
  const AccountInfo *a = in->accounts;
  Config c;
  sol_memset_(&c, 0, sizeof(c));
  TRY(check_rules(in->data + 1, &c));
  TRY(signer(&a[1]));
  TRY(upgrade_authority_signed(in));
  TRY(mint_account(&a[4]));
  TRY(mint_account(&a[5]));
  TRY(token_account(&a[3], a[4].key, (const Pubkey *)(a[3].data + TOKEN_OWNER_AT)));
  Bytes config_seeds[2] = {{(const u8 *)"config", 6}, {&c.config_bump, 1}};
  TRY(canonical_address(in, &a[0], config_seeds, 1, &c.config_bump));
  Bytes authority_seeds[1] = {{(const u8 *)"authority", 9}};
  TRY(canonical_address(in, &a[8], authority_seeds, 1, &c.authority_bump));
  c.tag = TAG_CONFIG;
  c.version = 1;
  c.service_authority = *a[1].key;
  c.treasury = *a[3].key;
  c.usdc_mint = *a[4].key;
  c.stake_mint = *a[5].key;
  c.pool = *a[6].key;
  c.stake_pool = *a[7].key;
  c.vault_authority = *a[8].key;
  TRY(create_pool(in, &c, false));
  TRY(create_pool(in, &c, true));
  SignerSeeds config_signer = {config_seeds, 2};
  TRY(create_account(in, &(NewAccount){&a[2], &a[0], sizeof(Config), in->program_id, &config_signer}));
  sol_memcpy_(a[0].data, &c, sizeof(c));
  return E_OK;
}
