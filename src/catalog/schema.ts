/** Tables owned by the catalog part: the models governance approved, and their retirements. */

/** The channel every change to the approvals is sent on (NOTIFY), so every node reloads its catalog. */
export const MODEL_APPROVAL_CHANGES = "svc_model_approval_changes";

export const CATALOG_MIGRATIONS = [
  {
    // A model's `created` in GET /models is its approved_at. A retired model keeps its row: jobs
    // settled on it name it, and stay readable and verifiable after it is refused.
    id: "catalog/001_approved_models",
    sql: `
      CREATE TABLE approved_models (
        id text PRIMARY KEY,
        owned_by text NOT NULL,
        tier text NOT NULL CHECK (tier IN ('lite', 'standard', 'pro', 'max')),
        parameters text NOT NULL,
        context_window integer NOT NULL CHECK (context_window > 0),
        description text NOT NULL,
        tokenizer text CHECK (tokenizer IN ('llama3', 'qwen', 'mistral', 'gemma3')),
        approved_at timestamptz NOT NULL DEFAULT now(),
        retires_at timestamptz,
        retirement_reason text,
        CHECK ((retires_at IS NULL) = (retirement_reason IS NULL))
      );
      CREATE FUNCTION notify_model_approval_change() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('${MODEL_APPROVAL_CHANGES}', '');
        RETURN NULL;
      END
      $$;
      -- Per statement: a node reloads the whole (small) table whatever changed, once per change.
      CREATE TRIGGER approved_models_changed AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON approved_models
        FOR EACH STATEMENT EXECUTE FUNCTION notify_model_approval_change();
    `,
  },
];
