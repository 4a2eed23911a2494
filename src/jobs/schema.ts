/**
 * The jobs table. This first migration also created `chain_actions`, which the chain journal
 * (chain/journal.ts) owns since: a released migration is never edited, so its SQL stays as it
 * ran, and later changes to that table are the chain part's migrations.
 */
import { readInBoth, type Migration } from "../store/index.ts";

export const JOBS_MIGRATIONS: readonly Migration[] = [
  {
    id: "jobs/001_jobs",
    sql: `
      CREATE TABLE jobs (
        id text PRIMARY KEY,
        wallet text NOT NULL,
        model text NOT NULL,
        tier text NOT NULL,
        status text NOT NULL,
        locked_credits integer NOT NULL,
        max_tokens integer NOT NULL,
        credits_charged integer NOT NULL DEFAULT 0,
        worker_address text,
        worker_staked boolean NOT NULL DEFAULT false,
        escrow_address text,
        escrow_tx text,
        settlement_tx text,
        refund_tx text,
        slot bigint,
        proof_hash text,
        proof_signature text,
        prompt_tokens integer NOT NULL DEFAULT 0,
        completion_tokens integer NOT NULL DEFAULT 0,
        finish_reason text,
        failure_reason text,
        created_at timestamptz NOT NULL,
        completed_at timestamptz,
        last_token_at timestamptz
      );
      CREATE INDEX jobs_by_wallet ON jobs (wallet, id);
      CREATE INDEX jobs_unfinished ON jobs (status) WHERE status IN ('pending', 'processing', 'settling');

      -- A chain transaction is recorded (signature and signed bytes) before it is sent, so that after
      -- a crash it is either found on the chain or sent again, never lost and never doubled.
      CREATE TABLE chain_actions (
        signature text PRIMARY KEY,
        kind text NOT NULL,
        -- The job id, or for a deposit the wallet address.
        subject text NOT NULL,
        -- What is needed to build the transaction again (a deposit's credits).
        params jsonb NOT NULL DEFAULT '{}',
        wire bytea NOT NULL,
        state text NOT NULL DEFAULT 'sent',
        slot bigint,
        error text,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX chain_actions_open ON chain_actions (state) WHERE state = 'sent';
      CREATE INDEX chain_actions_by_subject ON chain_actions (subject);
    `,
    sqlite: `
      CREATE TABLE jobs (
        id text PRIMARY KEY,
        wallet text NOT NULL,
        model text NOT NULL,
        tier text NOT NULL,
        status text NOT NULL,
        locked_credits integer NOT NULL,
        max_tokens integer NOT NULL,
        credits_charged integer NOT NULL DEFAULT 0,
        worker_address text,
        worker_staked boolean NOT NULL DEFAULT false,
        escrow_address text,
        escrow_tx text,
        settlement_tx text,
        refund_tx text,
        slot bigint,
        proof_hash text,
        proof_signature text,
        prompt_tokens integer NOT NULL DEFAULT 0,
        completion_tokens integer NOT NULL DEFAULT 0,
        finish_reason text,
        failure_reason text,
        created_at timestamptz NOT NULL,
        completed_at timestamptz,
        last_token_at timestamptz
      );
      CREATE INDEX jobs_by_wallet ON jobs (wallet, id);
      CREATE INDEX jobs_unfinished ON jobs (status) WHERE status IN ('pending', 'processing', 'settling');

      CREATE TABLE chain_actions (
        signature text PRIMARY KEY,
        kind text NOT NULL,
        subject text NOT NULL,
        params jsonb NOT NULL DEFAULT '{}',
        wire blob NOT NULL,
        state text NOT NULL DEFAULT 'sent',
        slot bigint,
        error text,
        created_at timestamptz NOT NULL DEFAULT (now()),
        updated_at timestamptz NOT NULL DEFAULT (now())
      );
      CREATE INDEX chain_actions_open ON chain_actions (state) WHERE state = 'sent';
      CREATE INDEX chain_actions_by_subject ON chain_actions (subject);
    `,
  },
  readInBoth("jobs/002_disputes", `
      -- The request as the caller sent it, kept while the job can still be disputed (and through
      -- its arbitration) so other workers can run it again; cleared after. JSON text, not jsonb:
      -- a caller's text may hold a lone surrogate, which JSON escapes and jsonb refuses.
      ALTER TABLE jobs ADD COLUMN request text;
      -- A caller's dispute: the hash it received, the dispute transaction, and the arbitration's end.
      ALTER TABLE jobs ADD COLUMN dispute_hash text;
      ALTER TABLE jobs ADD COLUMN dispute_tx text;
      ALTER TABLE jobs ADD COLUMN disputed_at timestamptz;
      ALTER TABLE jobs ADD COLUMN dispute_outcome text;
      ALTER TABLE jobs ADD COLUMN dispute_resolve_tx text;
      ALTER TABLE jobs ADD COLUMN dispute_returned_credits integer;
      -- An audit's finding on a settled job: reproduced, fraudulent or inconclusive.
      ALTER TABLE jobs ADD COLUMN audit_outcome text;
      -- The program's escrow record was deleted (its rent recovered) once nothing could change it.
      ALTER TABLE jobs ADD COLUMN escrow_closed boolean NOT NULL DEFAULT false;
      CREATE INDEX jobs_escrow_to_close ON jobs (completed_at) WHERE NOT escrow_closed;
      CREATE INDEX jobs_disputed ON jobs (status) WHERE status = 'disputed';
      CREATE INDEX jobs_keeping_request ON jobs (last_token_at) WHERE request IS NOT NULL;
    `),
  readInBoth("jobs/003_job_node", `
      -- The gateway node driving the job: while its lease lives only it ends the job; once the
      -- lease runs out a surviving node finishes or refunds it.
      ALTER TABLE jobs ADD COLUMN node_id text;
    `),
  readInBoth("jobs/004_ended_job_indexes", `
      -- Both are read only for ended jobs (jobsWithEscrowToClose, forgetRequests). Indexing every
      -- row version of a running job added two index entries to each of its writes.
      DROP INDEX jobs_escrow_to_close;
      DROP INDEX jobs_keeping_request;
      CREATE INDEX jobs_escrow_to_close ON jobs (id) WHERE NOT escrow_closed AND status IN ('settled', 'failed', 'refunded');
      CREATE INDEX jobs_keeping_request ON jobs (id) WHERE request IS NOT NULL AND status IN ('settled', 'failed', 'refunded');
    `),
  {
    id: "jobs/005_job_queues",
    sql: `
      -- The jobs that recovery, arbitration and the sweeps look for, each set a queue of job ids,
      -- in place of the partial indexes on jobs. Those indexes named status in their conditions,
      -- so every change of a job's status wrote a new entry into each index of the table, and left
      -- a dead row that only VACUUM, reading every index through, could remove: on the embedded
      -- database those VACUUMs held the node for longer the more jobs it had kept (151 to 790 ms
      -- over ten minutes of load, docs/performance.md). With nothing on jobs indexing a column
      -- that changes, an update stays on its page (HOT), in the 70% of each page that inserts
      -- leave free, and the page's old versions are reclaimed as it is next read. A VACUUM then
      -- has no index to read through, only the pages changed since the last one.
      CREATE TABLE job_queues (
        queue text NOT NULL,
        job_id text NOT NULL,
        -- The job's node (jobs.node_id), for a node's sweeps to take its own jobs.
        node_id text,
        -- When the job entered the queue: for the sweeps, when it ended.
        queued_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (queue, job_id)
      );
      INSERT INTO job_queues (queue, job_id, node_id, queued_at)
        SELECT 'unfinished', id, node_id, created_at FROM jobs WHERE status IN ('pending', 'processing', 'settling')
        UNION ALL SELECT 'disputed', id, node_id, coalesce(disputed_at, created_at) FROM jobs WHERE status = 'disputed'
        UNION ALL SELECT 'escrow_to_close', id, node_id, coalesce(completed_at, created_at) FROM jobs WHERE NOT escrow_closed AND status IN ('settled', 'failed', 'refunded')
        UNION ALL SELECT 'request_kept', id, node_id, coalesce(last_token_at, created_at) FROM jobs WHERE request IS NOT NULL AND status IN ('settled', 'failed', 'refunded');
      DROP INDEX jobs_unfinished;
      DROP INDEX jobs_disputed;
      DROP INDEX jobs_escrow_to_close;
      DROP INDEX jobs_keeping_request;
      ALTER TABLE jobs SET (fillfactor = 30);
    `,
    // SQLite updates a row in place: it has no fill factor to leave room for new versions.
    sqlite: `
      CREATE TABLE job_queues (
        queue text NOT NULL,
        job_id text NOT NULL,
        node_id text,
        queued_at timestamptz NOT NULL DEFAULT (now()),
        PRIMARY KEY (queue, job_id)
      );
      INSERT INTO job_queues (queue, job_id, node_id, queued_at)
        SELECT 'unfinished', id, node_id, created_at FROM jobs WHERE status IN ('pending', 'processing', 'settling')
        UNION ALL SELECT 'disputed', id, node_id, coalesce(disputed_at, created_at) FROM jobs WHERE status = 'disputed'
        UNION ALL SELECT 'escrow_to_close', id, node_id, coalesce(completed_at, created_at) FROM jobs WHERE NOT escrow_closed AND status IN ('settled', 'failed', 'refunded')
        UNION ALL SELECT 'request_kept', id, node_id, coalesce(last_token_at, created_at) FROM jobs WHERE request IS NOT NULL AND status IN ('settled', 'failed', 'refunded');
      DROP INDEX jobs_unfinished;
      DROP INDEX jobs_disputed;
      DROP INDEX jobs_escrow_to_close;
      DROP INDEX jobs_keeping_request;
    `,
  },
  readInBoth("jobs/006_dispute_bonds", `
      -- The bond a dispute holds from the caller's credits until its outcome.
      ALTER TABLE jobs ADD COLUMN dispute_bond_credits integer;
    `),
  {
    id: "jobs/007_escrow_tables",
    sql: `
      -- A job whose escrow is a slot of its wallet's escrow table: the table's id and the slot.
      -- Null for a job with an escrow record of its own.
      ALTER TABLE jobs ADD COLUMN escrow_table_id bigint;
      ALTER TABLE jobs ADD COLUMN escrow_table_slot integer;
      -- A table job's leaf in its batch's settlement (JSON: its index, the tree's size, the audit
      -- path up to the root the worker signed): with the chain, the job's receipt.
      ALTER TABLE jobs ADD COLUMN settlement_leaf text;
      -- Escrow table ids come in blocks of 1024 from here, one block to a gateway node at a time:
      -- a table's address is derived from its wallet and id, so no id is ever given out twice.
      CREATE SEQUENCE escrow_table_id_blocks;
    `,
    // SQLite has no sequences: the last block given out, in a row of its own.
    sqlite: `
      ALTER TABLE jobs ADD COLUMN escrow_table_id bigint;
      ALTER TABLE jobs ADD COLUMN escrow_table_slot integer;
      ALTER TABLE jobs ADD COLUMN settlement_leaf text;
      CREATE TABLE escrow_table_id_blocks (last_block bigint NOT NULL);
      INSERT INTO escrow_table_id_blocks (last_block) VALUES (0);
    `,
  },
];
