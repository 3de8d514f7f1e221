-- Phosphor session store on Postgres, schema version 1: the SQLite schema of migrations/ 0001 to 0003
-- in one step, with Postgres types. Columns keep the SQLite names and meanings (see those files).
--
-- `parts` and `usage` stay JSON text (checked with `::json`, which, unlike `jsonb`, accepts every
-- string JSON can hold, `\u0000` included), so both stores read and write the same bytes.
-- `sessions.seq` gives sessions an insertion order (SQLite's rowid) for listing.

CREATE TABLE sessions (
    seq                BIGINT  GENERATED ALWAYS AS IDENTITY UNIQUE,
    id                 TEXT    PRIMARY KEY CHECK (id <> ''),
    title              TEXT    NOT NULL,
    summary_message_id TEXT    NULL,
    prompt_tokens      BIGINT  NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    completion_tokens  BIGINT  NOT NULL DEFAULT 0 CHECK (completion_tokens >= 0),
    current_tokens     BIGINT  NOT NULL DEFAULT 0 CHECK (current_tokens >= 0),
    created_at         BIGINT  NOT NULL, -- Unix milliseconds
    updated_at         BIGINT  NOT NULL, -- Unix milliseconds
    masked_until       TEXT    NULL
);

CREATE INDEX sessions_by_update ON sessions (updated_at DESC, seq DESC);

CREATE TABLE messages (
    seq        BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT    NOT NULL UNIQUE CHECK (id <> ''),
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    role       TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    parts      TEXT    NOT NULL CHECK (json_typeof(parts::json) = 'array'),
    is_summary BOOLEAN NOT NULL DEFAULT FALSE,
    summarized_until TEXT NULL REFERENCES messages (id)
                          CHECK (summarized_until IS NULL OR is_summary),
    status     TEXT    NOT NULL DEFAULT 'complete'
                       CHECK (status IN ('complete', 'streaming', 'failed', 'cancelled')),
    name       TEXT    NULL,
    model      TEXT    NULL,
    usage      TEXT    NULL CHECK (usage IS NULL OR json_typeof(usage::json) IS NOT NULL),
    created_at BIGINT  NOT NULL, -- Unix milliseconds
    updated_at BIGINT  NOT NULL, -- Unix milliseconds
    pinned_message TEXT NULL REFERENCES messages (id)
                        CHECK (pinned_message IS NULL OR is_summary)
);

CREATE INDEX messages_by_session ON messages (session_id, seq);

-- The two tables point at each other: the session's pointers are added once messages exists. The
-- summary pointer is checked at COMMIT, so one transaction writes the summary and the session in
-- either order.
ALTER TABLE sessions ADD CONSTRAINT sessions_summary_message_id_fkey
    FOREIGN KEY (summary_message_id) REFERENCES messages (id) DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE sessions ADD CONSTRAINT sessions_masked_until_fkey
    FOREIGN KEY (masked_until) REFERENCES messages (id);
