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
    // SQLite has no statement triggers: one per kind of change, per row. A statement changing
    // several rows notifies once for each, which costs one more reload at most (CatalogReloads).
    sqlite: `
      CREATE TABLE approved_models (
        id text NOT NULL PRIMARY KEY,
        owned_by text NOT NULL,
        tier text NOT NULL CONSTRAINT approved_models_tier_check CHECK (tier IN ('lite', 'standard', 'pro', 'max')),
        parameters text NOT NULL,
        context_window integer NOT NULL CONSTRAINT approved_models_context_window_check CHECK (context_window > 0),
        description text NOT NULL,
        tokenizer text CONSTRAINT approved_models_tokenizer_check CHECK (tokenizer IN ('llama3', 'qwen', 'mistral', 'gemma3')),
        approved_at timestamptz NOT NULL DEFAULT (now()),
        retires_at timestamptz,
        retirement_reason text,
        CONSTRAINT approved_models_check CHECK ((retires_at IS NULL) = (retirement_reason IS NULL))
      );
      CREATE TRIGGER approved_models_changed_insert AFTER INSERT ON approved_models
      BEGIN SELECT pg_notify('${MODEL_APPROVAL_CHANGES}', ''); END;
      CREATE TRIGGER approved_models_changed_update AFTER UPDATE ON approved_models
      BEGIN SELECT pg_notify('${MODEL_APPROVAL_CHANGES}', ''); END;
      CREATE TRIGGER approved_models_changed_delete AFTER DELETE ON approved_models
      BEGIN SELECT pg_notify('${MODEL_APPROVAL_CHANGES}', ''); END;
    `,
  },
];
