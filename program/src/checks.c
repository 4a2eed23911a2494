/* Account checks shared by every instruction: owner, type tag, signer, writable, token fields. */
#include "escrow.h"

static const Pubkey TOKEN_PROGRAM = {{6, 221, 246, 225, 215, 101, 161, 147, 217, 203, 225, 70, 206, 235, 121, 172,
                                      28, 180, 133, 237, 95, 91, 55, 145, 58, 140, 245, 133, 126, 255, 0, 169}};
static const Pubkey SYSTEM_PROGRAM = {{0}};
static const Pubkey ED25519_PROGRAM = {{3, 125, 70, 214, 124, 147, 251, 190, 18, 249, 66, 143, 131, 141, 64, 255,
                                        5, 112, 116, 73, 39, 244, 138, 100, 252, 202, 112, 68, 128, 0, 0, 0}};
static const Pubkey UPGRADEABLE_LOADER = {{2, 168, 246, 145, 78, 136, 161, 176, 226, 16, 21, 62, 247, 99, 174, 43,
                                           0, 194, 185, 61, 22, 193, 36, 210, 192, 83, 122, 16, 4, 128, 0, 0}};
static const Pubkey INSTRUCTIONS_SYSVAR = {{6, 167, 213, 23, 24, 123, 209, 102, 53, 218, 212, 4, 85, 253, 194, 192,
                                            193, 36, 198, 143, 33, 86, 117, 165, 219, 186, 203, 95, 8, 0, 0, 0}};

#define TRY(expr)                 \
  do {                            \
    u64 err_ = (expr);            \
    if (err_ != E_OK) return err_; \
  } while (0)
#define NEED_ACCOUNTS(in, n) \
  if ((in)->account_count < (n)) return E_NOT_ENOUGH_ACCOUNTS
#define NEED_DATA(in, n) \
  if ((in)->data_len != (n)) return E_INVALID_INSTRUCTION

static u64 signer(const AccountInfo *a) { return a->is_signer ? E_OK : E_MISSING_SIGNER; }
static u64 writable(const AccountInfo *a) { return a->is_writable ? E_OK : E_NOT_WRITABLE; }
static u64 expect_key(const AccountInfo *a, const Pubkey *key) { return key_equal(a->key, key) ? E_OK : E_WRONG_ADDRESS; }

/* An account of ours: owned by this program, of the right type and size. */
static u64 owned(const Input *in, const AccountInfo *a, u8 tag, u64 size) {
  if (!key_equal(a->owner, in->program_id)) return E_WRONG_OWNER;
  if (a->data_len < size || a->data[0] != tag) return E_WRONG_ACCOUNT_TYPE;
  return E_OK;
}

static u64 load_config(const Input *in, const AccountInfo *a, const Config **out) {
  TRY(owned(in, a, TAG_CONFIG, sizeof(Config)));
  *out = (const Config *)a->data;
  return E_OK;
}

/* The service authority named in the config, signing. */
static u64 service_authority(const Config *c, const AccountInfo *a) {
  TRY(expect_key(a, &c->service_authority));
  return signer(a);
}

/* An initialized SPL token account of `mint`, whose owner field is `owner`. */
static u64 token_account(const AccountInfo *a, const Pubkey *mint, const Pubkey *owner) {
  if (!key_equal(a->owner, &TOKEN_PROGRAM)) return E_WRONG_OWNER;
  if (a->data_len != TOKEN_ACCOUNT_SIZE || a->data[TOKEN_STATE_AT] != 1) return E_WRONG_ACCOUNT_TYPE;
  if (!key_equal((const Pubkey *)(a->data + TOKEN_MINT_AT), mint)) return E_WRONG_MINT;
  if (!key_equal((const Pubkey *)(a->data + TOKEN_OWNER_AT), owner)) return E_WRONG_TOKEN_OWNER;
  return E_OK;
}

static u64 token_amount(const AccountInfo *a) { return *(const u64 *)(a->data + TOKEN_AMOUNT_AT); }

/* An initialized mint account. */
static u64 mint_account(const AccountInfo *a) {
  if (!key_equal(a->owner, &TOKEN_PROGRAM)) return E_WRONG_OWNER;
  if (a->data_len != 82 || a->data[45] != 1) return E_WRONG_ACCOUNT_TYPE;
  return E_OK;
}

static i64 now_s(void) {
  Clock clock;
  sol_get_clock_sysvar(&clock);
  return clock.unix_timestamp;
}

/* True once `seconds` have passed since `since`; never overflows. */
static bool elapsed(i64 since, i64 now, i64 seconds) {
  if (now < since) return false;
  return (u64)(now - since) >= (u64)seconds;
}

/* The canonical program address of `seeds` must be `a`; its bump is returned through `bump`. */
static u64 canonical_address(const Input *in, const AccountInfo *a, const Bytes *seeds, u64 count, u8 *bump) {
  Pubkey derived;
  if (sol_try_find_program_address(seeds, count, in->program_id, &derived, bump) != 0) return E_WRONG_ADDRESS;
  return expect_key(a, &derived);
}

/* floor(amount * bps / 10000) without the product overflowing u64. */
static u64 share_of(u64 amount, u16 bps) {
  return (amount / BPS_DENOMINATOR) * bps + ((amount % BPS_DENOMINATOR) * bps) / BPS_DENOMINATOR;
}
