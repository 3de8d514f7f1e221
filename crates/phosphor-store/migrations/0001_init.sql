-- Phosphor session store, schema version 1.
--
-- `sessions.summary_message_id` and `messages.session_id` point at each other. SQLite resolves
-- a foreign key when it is checked, not when the table is created, so the forward reference is
-- fine; the summary pointer is DEFERRABLE INITIALLY DEFERRED so that one transaction may write
-- the summary message and the session row in either order and is checked once, at COMMIT.
-- Nothing in Phosphor deletes rows (compaction never deletes stored messages); the cascade on
-- `messages.session_id` only matters to someone removing a session by hand.

CREATE TABLE sessions (
    id                 TEXT    PRIMARY KEY NOT NULL CHECK (id <> ''),
    title              TEXT    NOT NULL,
    summary_message_id TEXT    NULL
                               REFERENCES messages (id) DEFERRABLE INITIALLY DEFERRED,
    prompt_tokens      INTEGER NOT NULL DEFAULT 0 CHECK (prompt_tokens >= 0),
    completion_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (completion_tokens >= 0),
    current_tokens     INTEGER NOT NULL DEFAULT 0 CHECK (current_tokens >= 0),
    created_at         INTEGER NOT NULL, -- Unix milliseconds
    updated_at         INTEGER NOT NULL  -- Unix milliseconds
);

-- list_sessions: most recently updated first.
CREATE INDEX sessions_by_update ON sessions (updated_at DESC);

CREATE TABLE messages (
    -- Insertion order; AUTOINCREMENT so a sequence number is never reused.
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT    NOT NULL UNIQUE CHECK (id <> ''),
    session_id TEXT    NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    role       TEXT    NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
    -- JSON array of phosphor_base::message::Part (serde's externally visible form).
    parts      TEXT    NOT NULL CHECK (json_valid(parts) AND json_type(parts) = 'array'),
    is_summary INTEGER NOT NULL DEFAULT 0 CHECK (is_summary IN (0, 1)),
    -- For a summary: the last message it replaces. History resumes after that message.
    summarized_until TEXT NULL REFERENCES messages (id)
                          CHECK (summarized_until IS NULL OR is_summary = 1),
    status     TEXT    NOT NULL DEFAULT 'complete'
                       CHECK (status IN ('complete', 'streaming', 'failed', 'cancelled')),
    name       TEXT    NULL,
    model      TEXT    NULL,
    -- JSON object of phosphor_base::message::Usage, or NULL.
    usage      TEXT    NULL CHECK (usage IS NULL OR json_valid(usage)),
    created_at INTEGER NOT NULL, -- Unix milliseconds
    updated_at INTEGER NOT NULL  -- Unix milliseconds
);

-- messages(), history() and count_messages(): a range scan of one session in order.
CREATE INDEX messages_by_session ON messages (session_id, seq);
