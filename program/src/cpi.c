/*
 * Calls into the system and token programs. Every call passes all of the instruction's accounts.
 * BPF functions take at most five arguments, hence the small argument structs.
 */
#include "escrow.h"

typedef struct {
  const AccountInfo *from;
  const AccountInfo *to;
  const AccountInfo *authority;
  u64 amount;
} Transfer;

typedef struct {
  const AccountInfo *payer;
  const AccountInfo *account;
  u64 space;
  const Pubkey *owner; /* the program owning the new account */
  const SignerSeeds *seeds; /* the new account's program-address seeds */
} NewAccount;

static u64 invoke(const Input *in, Instruction *ix, const SignerSeeds *signers, u64 signer_count) {
  return sol_invoke_signed_c(ix, in->accounts, in->account_count, signers, signer_count);
}

/* Token Transfer (3); `signers` are the seeds of a program-address authority, or none. */
static u64 token_transfer(const Input *in, const Transfer *t, const SignerSeeds *signers, u64 signer_count) {
  if (t->amount == 0) return E_OK;
  u8 data[9];
  data[0] = 3;
  write_u64(data + 1, t->amount);
  AccountMeta metas[3] = {{t->from->key, true, false}, {t->to->key, true, false}, {t->authority->key, false, true}};
  Instruction ix = {(Pubkey *)&TOKEN_PROGRAM, metas, 3, data, sizeof(data)};
  return invoke(in, &ix, signers, signer_count);
}

/* One system-program instruction: its u32 tag and one u64 or key argument. */
typedef struct {
  u32 tag;
  const u8 *arg;
  u64 arg_len;
} SystemCall;

/* Signed by `n`'s seeds; `from_payer` adds the payer as the first account (a transfer). */
static u64 system_call(const Input *in, const NewAccount *n, const SystemCall *call, bool from_payer) {
  u8 data[4 + 32];
  sol_memset_(data, 0, 4);
  data[0] = (u8)call->tag;
  sol_memcpy_(data + 4, call->arg, call->arg_len);
  AccountMeta metas[2] = {{n->payer->key, true, true}, {n->account->key, true, true}};
  Instruction ix = {(Pubkey *)&SYSTEM_PROGRAM, from_payer ? metas : metas + 1, from_payer ? 2 : 1, data, 4 + call->arg_len};
  return invoke(in, &ix, n->seeds, 1);
}

/*
 * The rent sysvar's minimum balance for `space` bytes: (128 + space) x lamports per byte-year x
 * exemption threshold. The threshold is an f64 (2.0 on older clusters, 1.0 since rent was halved
 * in years and doubled in rate) and BPF has no floating point, so it is read as fixed point with
 * 10 fractional bits, rounded up: exact for whole thresholds, never below the minimum otherwise.
 */
static u64 rent_exempt_minimum(u64 space) {
  Rent rent;
  sol_get_rent_sysvar(&rent);
  u64 bits = read_u64(rent.exemption_threshold);
  u64 exponent = (bits >> 52) & 0x7ff;
  u64 mantissa = (bits & ((1ULL << 52) - 1)) | (1ULL << 52);
  u64 threshold_q10 = 0;
  if (exponent >= 1075 - 10 + 1 - 53 && exponent <= 1075 - 10) {
    u64 shift = 1075 - 10 - exponent; /* value x 1024 = mantissa >> shift */
    threshold_q10 = (mantissa >> shift) + ((mantissa & ((1ULL << shift) - 1)) != 0);
  } else if (exponent != 0 && exponent < 1075 - 10) {
    threshold_q10 = 1; /* a positive threshold below 1/1024 */
  }
  u64 base = (128 + space) * rent.lamports_per_byte_year;
  return (base * threshold_q10 + 1023) >> 10;
}

/*
 * A rent-exempt account at a program address that signs through its seeds. Anyone can send
 * lamports to an address before it exists, which would make CreateAccount fail; such an
 * account (system-owned, no data) is taken over by topping it up, allocating and assigning it.
 */
static u64 create_account(const Input *in, const NewAccount *n) {
  u64 needed = rent_exempt_minimum(n->space);
  u64 held = *n->account->lamports;
  if (held == 0) {
    u8 data[52];
    sol_memset_(data, 0, 4);
    write_u64(data + 4, needed);
    write_u64(data + 12, n->space);
    sol_memcpy_(data + 20, n->owner, 32);
    AccountMeta metas[2] = {{n->payer->key, true, true}, {n->account->key, true, true}};
    Instruction ix = {(Pubkey *)&SYSTEM_PROGRAM, metas, 2, data, sizeof(data)};
    return invoke(in, &ix, n->seeds, 1);
  }
  if (!key_equal(n->account->owner, &SYSTEM_PROGRAM) || n->account->data_len != 0) return E_ALREADY_EXISTS;
  u8 arg[8];
  if (held < needed) {
    write_u64(arg, needed - held);
    TRY(system_call(in, n, &(SystemCall){2, arg, 8}, true)); /* Transfer */
  }
  write_u64(arg, n->space);
  TRY(system_call(in, n, &(SystemCall){8, arg, 8}, false)); /* Allocate */
  return system_call(in, n, &(SystemCall){1, n->owner->x, 32}, false); /* Assign */
}

/* A new token account of `mint` at a program address, its token authority `authority`. */
static u64 create_token_account(const Input *in, NewAccount *n, const AccountInfo *mint, const Pubkey *authority) {
  n->space = TOKEN_ACCOUNT_SIZE;
  n->owner = &TOKEN_PROGRAM;
  TRY(create_account(in, n));
  u8 data[33];
  data[0] = 18; /* InitializeAccount3: needs no rent sysvar account */
  sol_memcpy_(data + 1, authority, 32);
  AccountMeta metas[2] = {{n->account->key, true, false}, {mint->key, false, false}};
  Instruction ix = {(Pubkey *)&TOKEN_PROGRAM, metas, 2, data, sizeof(data)};
  return invoke(in, &ix, NULL, 0);
}

/* A transfer out of a vault or a pool, signed by the vault authority's seeds. */
static u64 authority_transfer(const Input *in, const Config *c, const Transfer *t) {
  const u8 bump = c->authority_bump;
  const Bytes seeds[2] = {{(const u8 *)"authority", 9}, {&bump, 1}};
  const SignerSeeds signer = {seeds, 2};
  return token_transfer(in, t, &signer, 1);
}
