-- Phosphor session store on Postgres, schema version 2: SQLite's migrations/0004 with Postgres
-- types (see that file for the meaning).

CREATE TABLE session_heads (
    session_id TEXT    PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    namespace  TEXT    NOT NULL,
    head       TEXT    NOT NULL,
    len        BIGINT  NOT NULL CHECK (len >= 0),
    stored     BIGINT  NOT NULL CHECK (stored >= 0)
);

CREATE INDEX session_heads_by_head ON session_heads (namespace, head);
