/*
 * Credit vaults: one USDC token account per wallet at the program address ["vault", wallet], its
 * token authority the program's vault authority. Deposits are plain token transfers into it; the
 * only ways out are a `lock` into the escrow pool and a withdrawal the wallet signs, paid to a
 * token account of the wallet's own.
 */
#include "escrow.h"

/* The vault of `wallet` at `a`, derived with the given bump. */
static u64 wallet_vault(const Input *in, const Config *c, const AccountInfo *a, const Pubkey *wallet, u8 bump) {
  const Bytes seeds[3] = {{(const u8 *)"vault", 5}, {wallet->x, 32}, {&bump, 1}};
  Pubkey derived;
  if (sol_create_program_address(seeds, 3, in->program_id, &derived) != 0) return E_WRONG_ADDRESS;
  TRY(expect_key(a, &derived));
  return token_account(a, &c->usdc_mint, &c->vault_authority);
}

/* Accounts: config, payer (w, s), vault (w), USDC mint, vault authority, token program, system
   program. Data: wallet (32). Anyone may open any wallet's vault: it can only ever pay that wallet. */
static u64 open_vault(const Input *in) {
  NEED_ACCOUNTS(in, 7);
  NEED_DATA(in, 33);
  const AccountInfo *a = in->accounts;
  const Config *c;
  TRY(load_config(in, &a[0], &c));
  TRY(signer(&a[1]));
  TRY(expect_key(&a[3], &c->usdc_mint));
  TRY(expect_key(&a[4], &c->vault_authority));
  Pubkey wallet;
  sol_memcpy_(&wallet, in->data + 1, 32);
  u8 bump;
  Bytes seeds[3] = {{(const u8 *)"vault", 5}, {wallet.x, 32}, {&bump, 1}};
  TRY(canonical_address(in, &a[2], seeds, 2, &bump));
  SignerSeeds signer_seeds = {seeds, 3};
  NewAccount n = {&a[1], &a[2], 0, NULL, &signer_seeds};
  return create_token_account(in, &n, &a[3], &c->vault_authority);
}

/* Accounts: config, wallet (s), vault (w), destination token account of the wallet (w), vault
   authority, token program. Data: amount u64, vault bump u8. */
static u64 withdraw(const Input *in) {
  NEED_ACCOUNTS(in, 6);
  NEED_DATA(in, 10);
  const AccountInfo *a = in->accounts;
  const Config *c;
  TRY(load_config(in, &a[0], &c));
  TRY(signer(&a[1]));
  TRY(writable(&a[2]));
  TRY(writable(&a[3]));
  TRY(wallet_vault(in, c, &a[2], a[1].key, in->data[9]));
  TRY(token_account(&a[3], &c->usdc_mint, a[1].key));
  TRY(expect_key(&a[4], &c->vault_authority));
  u64 amount = read_u64(in->data + 1);
  if (amount == 0) return E_INVALID_AMOUNT;
  if (amount > token_amount(&a[2])) return E_INSUFFICIENT_FUNDS;
  return authority_transfer(in, c, &(Transfer){&a[2], &a[3], &a[4], amount});
}
