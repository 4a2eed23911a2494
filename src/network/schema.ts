/** Tables owned by the network part: the operator's suspensions of workers. */

/** The channel a worker's suspension or reinstatement is sent on (NOTIFY): a prefix below, then its address. */
export const WORKER_SUSPENSION_CHANGES = "svc_worker_suspensions";
export const SUSPENDED = "suspended:";
export const REINSTATED = "reinstated:";

export const NETWORK_MIGRATIONS = [
  {
    // A suspension by the operator outlives the node that heard it: every node loads these at its
    // start, and the trigger tells the running ones, once the change commits.
    id: "network/001_worker_suspensions",
    sql: `
      CREATE TABLE worker_suspensions (
        address text PRIMARY KEY,
        reason text NOT NULL,
        suspended_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE FUNCTION notify_worker_suspension_change() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('${WORKER_SUSPENSION_CHANGES}', CASE WHEN TG_OP = 'DELETE' THEN '${REINSTATED}' || OLD.address ELSE '${SUSPENDED}' || NEW.address END);
        RETURN NULL;
      END
      $$;
      CREATE TRIGGER worker_suspension_changed AFTER INSERT OR UPDATE OR DELETE ON worker_suspensions
        FOR EACH ROW EXECUTE FUNCTION notify_worker_suspension_change();
    `,
    // A SQLite trigger answers one kind of change: three, which together say what the one above does.
    sqlite: `
      CREATE TABLE worker_suspensions (
        address text NOT NULL PRIMARY KEY,
        reason text NOT NULL,
        suspended_at timestamptz NOT NULL DEFAULT (now())
      );
      CREATE TRIGGER worker_suspension_changed_insert AFTER INSERT ON worker_suspensions
      BEGIN SELECT pg_notify('${WORKER_SUSPENSION_CHANGES}', '${SUSPENDED}' || NEW.address); END;
      CREATE TRIGGER worker_suspension_changed_update AFTER UPDATE ON worker_suspensions
      BEGIN SELECT pg_notify('${WORKER_SUSPENSION_CHANGES}', '${SUSPENDED}' || NEW.address); END;
      CREATE TRIGGER worker_suspension_changed_delete AFTER DELETE ON worker_suspensions
      BEGIN SELECT pg_notify('${WORKER_SUSPENSION_CHANGES}', '${REINSTATED}' || OLD.address); END;
    `,
  },
];
