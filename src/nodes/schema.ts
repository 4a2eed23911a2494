/** The gateway nodes sharing one database, each holding a lease it renews while it lives. */
export const NODES_MIGRATIONS = [
  {
    id: "nodes/001_gateway_nodes",
    sql: `
      CREATE TABLE gateway_nodes (
        node_id text PRIMARY KEY,
        -- Which run of the node holds the lease: a restart under the same id is a new incarnation.
        incarnation text NOT NULL,
        started_at timestamptz NOT NULL DEFAULT now(),
        lease_until timestamptz NOT NULL,
        -- A survivor finishing a dead node's work: it holds the dead node's lease while it does.
        taken_over_by text
      );
    `,
    // NOT NULL on the key: SQLite lets a NULL into a key that is not its rowid, PostgreSQL never.
    sqlite: `
      CREATE TABLE gateway_nodes (
        node_id text NOT NULL PRIMARY KEY,
        incarnation text NOT NULL,
        started_at timestamptz NOT NULL DEFAULT (now()),
        lease_until timestamptz NOT NULL,
        taken_over_by text
      );
    `,
  },
  {
    // What the nodes sharing this database have in common and no other deployment has: it names
    // their subjects on the message bus, so two deployments on one NATS server stay apart.
    id: "nodes/002_deployment_id",
    sql: `
      CREATE TABLE deployment (
        one_row boolean PRIMARY KEY DEFAULT true CHECK (one_row),
        id text NOT NULL
      );
      INSERT INTO deployment (id) VALUES (replace(gen_random_uuid()::text, '-', ''));
    `,
    // 32 random hex digits, as a uuid's without its dashes.
    sqlite: `
      CREATE TABLE deployment (
        one_row boolean NOT NULL PRIMARY KEY DEFAULT true CONSTRAINT deployment_one_row_check CHECK (one_row),
        id text NOT NULL
      );
      INSERT INTO deployment (id) VALUES (lower(hex(randomblob(16))));
    `,
  },
];
