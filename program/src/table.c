/*
 * Escrow tables: many jobs per account and per transaction. `lock_batch` moves the estimates of
 * several jobs of one wallet from its vault into the escrow pool in one transfer and gives each a
 * 12-byte slot of the wallet's current table; `settle_batch` settles any number of one worker's
 * slots of a table against one Ed25519 signature of the worker over a Merkle root of its jobs'
 * outputs and the slots' charges; `refund_slots` returns slots' locks (the authority at any time,
 * anyone after the timeout); `close_table` deletes a table whose every slot is final once the
 * dispute window has passed. A job's receipt is its lock instruction, its settlement's signed
 * message and its leaf's path to the root: the program keeps only what moves money.
 */
#include "escrow.h"

/* The settlement message starts with `svc-settle-1` and the table's address. */
static const char SETTLE_DOMAIN[] = "svc-settle-1";
#define SETTLE_DOMAIN_LEN 12
#define SETTLE_ENTRY_SIZE 9
#define LOCK_ENTRY_SIZE 25 /* amount u64, tier u8, job key (16) */

static Slot *slot_at(const AccountInfo *table, u64 i) { return (Slot *)(table->data + sizeof(Table) + i * sizeof(Slot)); }

static u64 table_size(u64 capacity) { return sizeof(Table) + capacity * sizeof(Slot); }

/* A table of ours, writable, as large as its capacity says. */
static u64 load_table(const Input *in, const AccountInfo *a, Table **out) {
  TRY(writable(a));
  TRY(owned(in, a, TAG_TABLE, sizeof(Table)));
  Table *t = (Table *)a->data;
  if (a->data_len < table_size(t->capacity)) return E_WRONG_ACCOUNT_TYPE;
  *out = t;
  return E_OK;
}

/* The config (account 0), the service authority signing (account 1) and its table (account 2). */
static u64 authority_table(const Input *in, const Config **c, Table **t) {
  TRY(load_config(in, &in->accounts[0], c));
  TRY(service_authority(*c, &in->accounts[1]));
  return load_table(in, &in->accounts[2], t);
}

static void close_slot(Table *t, Slot *s, u8 status, i64 now) {
  s->status = status;
  u64 after = now > t->opened_at ? (u64)(now - t->opened_at) : 0;
  if (after > 0xffff) after = 0xffff;
  s->closed_after[0] = (u8)after;
  s->closed_after[1] = (u8)(after >> 8);
  t->open--;
  if (now > t->last_closed_at) t->last_closed_at = now;
}

#define LOCK_ENTRIES_AT 45

/* The sum of lock_batch's job amounts, each above zero. */
static u64 lock_entries_total(const Input *in, u64 count, u64 *total) {
  if (in->data_len != LOCK_ENTRIES_AT + count * LOCK_ENTRY_SIZE) return E_INVALID_INSTRUCTION;
  *total = 0;
  for (u64 i = 0; i < count; i++) {
    u64 amount = read_u64(in->data + LOCK_ENTRIES_AT + i * LOCK_ENTRY_SIZE);
    if (amount == 0) return E_INVALID_AMOUNT;
    if (*total + amount < *total) return E_OVERFLOW;
    *total += amount;
  }
  return E_OK;
}

/* lock_batch's table (account 3): the wallet's table of the data's id, created with the data's
   capacity when it does not exist yet, with room for the data's count of locks now, its next
   slot the data's first slot. */
static u64 open_table(const Input *in, const Pubkey *wallet, Table **out) {
  const AccountInfo *a = &in->accounts[3], *payer = &in->accounts[2], *vault = &in->accounts[4];
  const u8 *id = in->data + 34;
  u64 capacity = in->data[42], first = in->data[43], count = in->data[44];
  if (key_equal(a->owner, in->program_id)) {
    TRY(load_table(in, a, out));
    Table *t = *out;
    if (!key_equal(&t->vault, vault->key)) return E_WRONG_ADDRESS;
    if (t->used != first) return E_WRONG_SLOT;
    i64 now = now_s();
    bool taking = now >= t->opened_at && now - t->opened_at <= APPEND_WINDOW_S;
    return taking && (u64)t->used + count <= t->capacity ? E_OK : E_TABLE_FULL;
  }
  if (first != 0) return E_WRONG_SLOT;
  if (capacity == 0 || count > capacity) return E_INVALID_AMOUNT;
  u8 bump;
  Bytes seeds[4] = {{(const u8 *)"table", 5}, {wallet->x, 32}, {id, 8}, {&bump, 1}};
  TRY(canonical_address(in, a, seeds, 3, &bump));
  SignerSeeds table_signer = {seeds, 4};
  TRY(create_account(in, &(NewAccount){payer, a, table_size(capacity), in->program_id, &table_signer}));
  Table *t = (Table *)a->data;
  t->tag = TAG_TABLE;
  t->bump = bump;
  t->capacity = (u8)capacity;
  t->table_id = read_u64(id);
  t->wallet = *wallet;
  t->vault = *vault->key;
  t->opened_at = now_s();
  *out = t;
  return E_OK;
}

/* Accounts: config, service authority (s), payer (w, s), table (w), vault (w), escrow pool (w),
   vault authority, token program, system program. Data: wallet (32), vault bump u8, table id u64,
   capacity u8 (used when the table is created), first slot u8 (the table's next: a lock lands
   on the slots it was signed for, and its transaction alone tells a receipt which they are),
   count u8, then per job: amount u64, tier u8 and a 16-byte job key, which the program keeps
   nowhere: it is the receipt's (the service writes the ULID of its `job_` ids). */
static u64 lock_batch(const Input *in) {
  NEED_ACCOUNTS(in, 9);
  if (in->data_len < LOCK_ENTRIES_AT) return E_INVALID_INSTRUCTION;
  const AccountInfo *a = in->accounts;
  const Config *c;
  TRY(load_config(in, &a[0], &c));
  TRY(service_authority(c, &a[1]));
  TRY(signer(&a[2]));
  TRY(writable(&a[4]));
  TRY(writable(&a[5]));
  TRY(expect_key(&a[5], &c->pool));
  TRY(expect_key(&a[6], &c->vault_authority));
  Pubkey wallet;
  sol_memcpy_(&wallet, in->data + 1, 32);
  TRY(wallet_vault(in, c, &a[4], &wallet, in->data[33]));
  u64 count = in->data[44], total;
  if (count == 0) return E_INVALID_AMOUNT;
  TRY(lock_entries_total(in, count, &total));
  if (total > token_amount(&a[4])) return E_INSUFFICIENT_FUNDS;
  Table *t;
  TRY(open_table(in, &wallet, &t));
  u64 after = (u64)(now_s() - t->opened_at);
  for (u64 i = 0; i < count; i++) {
    Slot *s = slot_at(&a[3], t->used++);
    sol_memcpy_(s->amount, in->data + LOCK_ENTRIES_AT + i * LOCK_ENTRY_SIZE, 8);
    s->status = ESCROW_LOCKED;
    s->locked_after = (u8)after;
  }
  t->open += (u8)count;
  return authority_transfer(in, c, &(Transfer){&a[4], &a[5], &a[6], total});
}

/* What one settlement pays, summed over its entries. */
typedef struct {
  u64 worker;
  u64 treasury;
  u64 returned;
  u16 bps; /* the worker's share */
  bool staked;
} Payouts;

/* The worker's settlement message for the table (account 2), found among the transaction's
   precompile signatures; `entries` and `count` point at its entries. */
static u64 settlement_entries(const Input *in, const Pubkey *worker, const u8 **entries, u64 *count) {
  u8 prefix[SETTLE_DOMAIN_LEN + 32];
  sol_memcpy_(prefix, SETTLE_DOMAIN, SETTLE_DOMAIN_LEN);
  sol_memcpy_(prefix + SETTLE_DOMAIN_LEN, in->accounts[2].key, 32);
  SignedMessage want = {worker, prefix, sizeof(prefix), false, NULL, 0};
  TRY(find_signed(&in->accounts[9], &want));
  const u64 head = sizeof(prefix) + 32; /* the root, which the receipts check */
  if (want.message_len < head + 1) return E_INVALID_INSTRUCTION;
  *count = want.message[head];
  *entries = want.message + head + 1;
  if (*count == 0 || want.message_len != head + 1 + *count * SETTLE_ENTRY_SIZE) return E_INVALID_INSTRUCTION;
  return E_OK;
}

/* Marks each entry's slot of the table (account 2) settled with its charge and adds up the payouts. */
static u64 settle_entries(const Input *in, Table *t, const u8 *entries, u64 count, Payouts *p) {
  const AccountInfo *table = &in->accounts[2];
  i64 now = now_s();
  for (u64 i = 0; i < count; i++) {
    const u8 *e = entries + i * SETTLE_ENTRY_SIZE;
    if (e[0] >= t->used) return E_INVALID_INSTRUCTION;
    Slot *s = slot_at(table, e[0]);
    if (s->status != ESCROW_LOCKED) return E_WRONG_STATUS;
    u64 amount = read_u64(s->amount), charge = read_u64(e + 1);
    if (charge > amount) return E_CHARGE_EXCEEDS_LOCK;
    u64 worker = share_of(charge, p->bps);
    p->worker += worker;
    p->treasury += charge - worker;
    p->returned += amount - charge;
    write_u64(s->amount, charge);
    if (p->staked) s->locked_after |= SLOT_STAKED;
    close_slot(t, s, ESCROW_SETTLED, now);
  }
  return E_OK;
}

/* Accounts: config, service authority (s), table (w), escrow pool (w), vault (w), worker's USDC
   token account (w), treasury (w), worker's stake address, vault authority, instructions sysvar,
   token program. Data: worker (32). The same transaction must carry the worker's Ed25519
   signature of the settlement message (`svc-settle-1`, the table's address, the Merkle root of the
   jobs' leaves, a count u8, then per job its slot u8 and charge u64), which says what to pay. */
static u64 settle_batch(const Input *in) {
  NEED_ACCOUNTS(in, 11);
  NEED_DATA(in, 33);
  const AccountInfo *a = in->accounts;
  const Config *c;
  Table *t;
  TRY(authority_table(in, &c, &t));
  TRY(writable(&a[3]));
  TRY(writable(&a[4]));
  TRY(writable(&a[5]));
  TRY(writable(&a[6]));
  TRY(expect_key(&a[3], &c->pool));
  TRY(expect_key(&a[4], &t->vault));
  Pubkey worker;
  sol_memcpy_(&worker, in->data + 1, 32);
  TRY(token_account(&a[5], &c->usdc_mint, &worker));
  TRY(expect_key(&a[6], &c->treasury));
  TRY(expect_key(&a[8], &c->vault_authority));
  const u8 *entries;
  u64 count;
  TRY(settlement_entries(in, &worker, &entries, &count));
  bool staked;
  TRY(worker_staked(in, c, &a[7], &worker, &staked));
  Payouts p = {0, 0, 0, staked ? c->staked_worker_share_bps : c->worker_share_bps, staked};
  TRY(settle_entries(in, t, entries, count, &p));
  TRY(authority_transfer(in, c, &(Transfer){&a[3], &a[5], &a[8], p.worker}));
  TRY(authority_transfer(in, c, &(Transfer){&a[3], &a[6], &a[8], p.treasury}));
  return authority_transfer(in, c, &(Transfer){&a[3], &a[4], &a[8], p.returned});
}

/* Accounts: config, table (w), escrow pool (w), vault (w), vault authority, token program, caller.
   Data: count u8, then slot u8 each. The service authority (signing as the caller) may refund at
   any time; anyone may refund a slot locked longer ago than the job timeout. */
static u64 refund_slots(const Input *in) {
  NEED_ACCOUNTS(in, 7);
  if (in->data_len < 2 || in->data_len != 2 + (u64)in->data[1] || in->data[1] == 0) return E_INVALID_INSTRUCTION;
  const AccountInfo *a = in->accounts;
  const Config *c;
  Table *t;
  TRY(load_config(in, &a[0], &c));
  TRY(load_table(in, &a[1], &t));
  TRY(writable(&a[2]));
  TRY(writable(&a[3]));
  TRY(expect_key(&a[2], &c->pool));
  TRY(expect_key(&a[3], &t->vault));
  TRY(expect_key(&a[4], &c->vault_authority));
  bool by_authority = a[6].is_signer && key_equal(a[6].key, &c->service_authority);
  i64 now = now_s();
  u64 total = 0;
  for (u64 i = 0; i < in->data[1]; i++) {
    u8 index = in->data[2 + i];
    if (index >= t->used) return E_INVALID_INSTRUCTION;
    Slot *s = slot_at(&a[1], index);
    if (s->status != ESCROW_LOCKED) return E_WRONG_STATUS;
    i64 locked_at = t->opened_at + (s->locked_after & ~SLOT_STAKED);
    if (!by_authority && !(now > locked_at && (u64)(now - locked_at) > (u64)c->job_timeout_s)) return E_TOO_EARLY;
    total += read_u64(s->amount);
    close_slot(t, s, ESCROW_REFUNDED, now);
  }
  return authority_transfer(in, c, &(Transfer){&a[2], &a[3], &a[4], total});
}

/* Accounts: config, service authority (s), table (w), rent destination (w). A table whose every
   slot is final, that takes no more locks, and whose last settlement or refund is older than the
   dispute window is deleted and its rent returned. */
static u64 close_table(const Input *in) {
  NEED_ACCOUNTS(in, 4);
  NEED_DATA(in, 1);
  const AccountInfo *a = in->accounts;
  const Config *c;
  Table *t;
  TRY(authority_table(in, &c, &t));
  TRY(writable(&a[3]));
  if (key_equal(a[2].key, a[3].key)) return E_WRONG_ADDRESS;
  if (t->open != 0) return E_WRONG_STATUS;
  i64 now = now_s();
  if (t->used < t->capacity && !elapsed(t->opened_at, now, APPEND_WINDOW_S + 1)) return E_WINDOW_OPEN;
  if (!elapsed(t->last_closed_at, now, c->dispute_window_s + 1)) return E_WINDOW_OPEN;
  u64 rent = *a[2].lamports;
  if (*a[3].lamports + rent < *a[3].lamports) return E_OVERFLOW;
  *a[3].lamports += rent;
  *a[2].lamports = 0;
  sol_memset_(a[2].data, 0, a[2].data_len);
  return E_OK;
}
