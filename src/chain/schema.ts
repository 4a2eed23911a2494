/**
 * The chain part's migrations of `chain_actions`, a table that jobs/001_jobs creates (that
 * migration stays in the jobs part: released migrations are never edited).
 */
import { readInBoth, type Migration } from "../store/index.ts";

export const CHAIN_MIGRATIONS: readonly Migration[] = [
  readInBoth("chain/001_action_node", `
      -- The gateway node that recorded the action: while its lease lives only it sends and
      -- finishes the action; once the lease runs out, a surviving node does.
      ALTER TABLE chain_actions ADD COLUMN node_id text;
    `),
  {
    id: "chain/002_action_per_subject",
    sql: `
      -- One transaction may carry several jobs' escrow locks: each job keeps a row of its own
      -- (its outcome is applied to it alone), and those rows share the signature.
      ALTER TABLE chain_actions DROP CONSTRAINT chain_actions_pkey;
      ALTER TABLE chain_actions ADD PRIMARY KEY (signature, subject);
    `,
    // SQLite changes a table's key only by building the table anew.
    sqlite: `
      CREATE TABLE chain_actions_keyed (
        signature text NOT NULL,
        kind text NOT NULL,
        subject text NOT NULL,
        params jsonb NOT NULL DEFAULT '{}',
        wire blob NOT NULL,
        state text NOT NULL DEFAULT 'sent',
        slot bigint,
        error text,
        created_at timestamptz NOT NULL DEFAULT (now()),
        updated_at timestamptz NOT NULL DEFAULT (now()),
        node_id text,
        PRIMARY KEY (signature, subject)
      );
      INSERT INTO chain_actions_keyed (signature, kind, subject, params, wire, state, slot, error, created_at, updated_at, node_id)
        SELECT signature, kind, subject, params, wire, state, slot, error, created_at, updated_at, node_id FROM chain_actions;
      DROP TABLE chain_actions;
      ALTER TABLE chain_actions_keyed RENAME TO chain_actions;
      CREATE INDEX chain_actions_open ON chain_actions (state) WHERE state = 'sent';
      CREATE INDEX chain_actions_by_subject ON chain_actions (subject);
    `,
  },
  {
    id: "chain/003_open_actions",
    sql: `
      -- The actions not yet finished, a table of their keys in place of the partial index on
      -- state. With state indexed, marking an action confirmed wrote new entries into every index
      -- of the table and left a dead row that only VACUUM, reading each index through, could
      -- remove; on the embedded database that VACUUM held the node for longer the more actions it
      -- had kept (209 to 1,009 ms over ten minutes of load, docs/performance.md). Now the mark
      -- stays on its page (HOT), in the half of each page left free for it, and a VACUUM reads
      -- only the pages changed since the last one.
      DROP INDEX chain_actions_open;
      CREATE TABLE open_chain_actions (
        signature text NOT NULL,
        subject text NOT NULL,
        PRIMARY KEY (signature, subject)
      );
      INSERT INTO open_chain_actions (signature, subject) SELECT signature, subject FROM chain_actions WHERE state = 'sent';
      ALTER TABLE chain_actions SET (fillfactor = 50);
    `,
    // SQLite updates a row in place: it has no fill factor to leave room for new versions.
    sqlite: `
      DROP INDEX chain_actions_open;
      CREATE TABLE open_chain_actions (
        signature text NOT NULL,
        subject text NOT NULL,
        PRIMARY KEY (signature, subject)
      );
      INSERT INTO open_chain_actions (signature, subject) SELECT signature, subject FROM chain_actions WHERE state = 'sent';
    `,
  },
];
