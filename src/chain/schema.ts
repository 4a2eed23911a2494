/**
 * The chain part's migrations of `chain_actions` (created by jobs/001_jobs before the journal
 * moved here; released migrations are never edited).
 */
export const CHAIN_MIGRATIONS = [
  {
    id: "chain/001_action_node",
    sql: `
      -- The gateway node that recorded the action: while its lease lives only it sends and
      -- finishes the action; once the lease runs out, a surviving node does.
      ALTER TABLE chain_actions ADD COLUMN node_id text;
    `,
  },
  {
    id: "chain/002_action_per_subject",
    sql: `
      -- One transaction may carry several jobs' escrow locks: each job keeps a row of its own
      -- (its outcome is applied to it alone), and those rows share the signature.
      ALTER TABLE chain_actions DROP CONSTRAINT chain_actions_pkey;
      ALTER TABLE chain_actions ADD PRIMARY KEY (signature, subject);
    `,
  },
];
