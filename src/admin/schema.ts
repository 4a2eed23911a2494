/** Tables owned by the admin part: the audit log of the operator's actions. */

export const ADMIN_MIGRATIONS = [
  {
    // Written in the same transaction as the action it records: an action that did not happen
    // leaves no row, and one that happened always has its row.
    id: "admin/001_audit_log",
    sql: `
      CREATE TABLE admin_actions (
        id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        action text NOT NULL,
        target text NOT NULL,
        reason text,
        actor text NOT NULL,
        at timestamptz NOT NULL DEFAULT now()
      );
    `,
    // The rowid is the identity: it only grows while no row is deleted, and audit rows never are.
    sqlite: `
      CREATE TABLE admin_actions (
        id INTEGER PRIMARY KEY,
        action text NOT NULL,
        target text NOT NULL,
        reason text,
        actor text NOT NULL,
        at timestamptz NOT NULL DEFAULT (now())
      );
    `,
  },
];
