/*
 * The slice of the Solana program ABI this program uses: the input buffer the runtime hands to
 * `entrypoint`, the account and instruction structures of the C calling convention for
 * cross-program invocation, and the syscalls, which the loader binds by name.
 */
#pragma once

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef unsigned long long u64;
typedef long long i64;
typedef _Bool bool;
#define true 1
#define false 0
#define NULL ((void *)0)

typedef struct { u8 x[32]; } Pubkey;

/* Same layout as the runtime's C account info: CPI reads and updates these fields in place. */
typedef struct {
  Pubkey *key;
  u64 *lamports;
  u64 data_len;
  u8 *data;
  Pubkey *owner;
  u64 rent_epoch;
  bool is_signer;
  bool is_writable;
  bool executable;
} AccountInfo;

/* A byte string: a seed, or a piece of a hash input. */
typedef struct { const u8 *addr; u64 len; } Bytes;
typedef struct { const Bytes *addr; u64 len; } SignerSeeds;
typedef struct { Pubkey *pubkey; bool is_writable; bool is_signer; } AccountMeta;
typedef struct {
  Pubkey *program_id;
  AccountMeta *accounts;
  u64 account_len;
  u8 *data;
  u64 data_len;
} Instruction;

typedef struct {
  u64 slot;
  i64 epoch_start_timestamp;
  u64 epoch;
  u64 leader_schedule_epoch;
  i64 unix_timestamp;
} Clock;

/* The rent sysvar; the exemption threshold (an f64, 2.0 on every cluster) is not read. */
typedef struct {
  u64 lamports_per_byte_year;
  u8 exemption_threshold[8];
  u8 burn_percent;
  u8 pad[7];
} Rent;

extern void sol_log_(const char *message, u64 len);
extern void sol_log_64_(u64, u64, u64, u64, u64);
extern u64 sol_create_program_address(const Bytes *seeds, u64 seeds_len, const Pubkey *program_id, Pubkey *address);
extern u64 sol_try_find_program_address(const Bytes *seeds, u64 seeds_len, const Pubkey *program_id, Pubkey *address,
                                        u8 *bump);
extern u64 sol_invoke_signed_c(const Instruction *instruction, const AccountInfo *account_infos, u64 account_infos_len,
                               const SignerSeeds *signers_seeds, u64 signers_seeds_len);
extern u64 sol_get_clock_sysvar(Clock *clock);
extern u64 sol_get_rent_sysvar(Rent *rent);
extern void sol_memcpy_(void *dst, const void *src, u64 n);
extern void sol_memset_(void *dst, u8 value, u64 n);
extern void sol_memcmp_(const void *a, const void *b, u64 n, int *result);

#define MAX_ACCOUNTS 16
/* Room the runtime leaves after each account's data so a program may grow it. */
#define MAX_PERMITTED_DATA_INCREASE (10 * 1024)

typedef struct {
  AccountInfo accounts[MAX_ACCOUNTS];
  u64 account_count;
  const u8 *data;
  u64 data_len;
  const Pubkey *program_id;
} Input;

/* Parses the runtime's serialized input. Returns false when it holds more accounts than we take. */
static bool deserialize(u8 *input, Input *out) {
  u64 count = *(u64 *)input;
  input += 8;
  if (count > MAX_ACCOUNTS) return false;
  for (u64 i = 0; i < count; i++) {
    u8 dup = *input++;
    AccountInfo *a = &out->accounts[i];
    if (dup != 0xff) {
      *a = out->accounts[dup];
      input += 7;
      continue;
    }
    a->is_signer = input[0];
    a->is_writable = input[1];
    a->executable = input[2];
    input += 3 + 4; /* the flags, then the original data length */
    a->key = (Pubkey *)input;
    input += 32;
    a->owner = (Pubkey *)input;
    input += 32;
    a->lamports = (u64 *)input;
    input += 8;
    a->data_len = *(u64 *)input;
    input += 8;
    a->data = input;
    input += a->data_len + MAX_PERMITTED_DATA_INCREASE;
    input = (u8 *)(((u64)input + 7) & ~7ULL);
    a->rent_epoch = *(u64 *)input;
    input += 8;
  }
  out->account_count = count;
  out->data_len = *(u64 *)input;
  input += 8;
  out->data = input;
  input += out->data_len;
  out->program_id = (const Pubkey *)input;
  return true;
}

/* The compiler may emit calls to these for struct copies. */
void *memcpy(void *dst, const void *src, u64 n) {
  sol_memcpy_(dst, src, n);
  return dst;
}
void *memset(void *dst, int value, u64 n) {
  sol_memset_(dst, (u8)value, n);
  return dst;
}

/* The syscall costs a flat 10 units where a byte loop costs several per byte. */
static bool bytes_equal(const void *a, const void *b, u64 n) {
  int result = 1;
  sol_memcmp_(a, b, n, &result);
  return result == 0;
}

static bool key_equal(const Pubkey *a, const Pubkey *b) { return bytes_equal(a, b, 32); }

/* Little-endian reads from instruction data, which has no alignment. */
static u64 read_u64(const u8 *p) {
  u64 v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
static u16 read_u16(const u8 *p) { return (u16)(p[0] | (p[1] << 8)); }

static void write_u64(u8 *p, u64 v) {
  for (int i = 0; i < 8; i++) p[i] = (u8)(v >> (8 * i));
}

#define LOG(text) sol_log_(text, sizeof(text) - 1)
