-- Phosphor session store, schema version 4.
--
-- Where each session stands for a client that resends its whole history (`phosphor serve`): an
-- opaque `head` key of the session's messages, how many messages it covers (`len`), and the
-- namespace the client named, and how many messages the session held then (`stored`: a session
-- that holds more was written by a process that died before recording its head). A request continues the session of its namespace whose head is the
-- longest prefix of what it sends; keeping heads in the store lets every proxy sharing the store
-- find sessions the others stored.

CREATE TABLE session_heads (
    session_id TEXT    PRIMARY KEY NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    namespace  TEXT    NOT NULL,
    head       TEXT    NOT NULL,
    len        INTEGER NOT NULL CHECK (len >= 0),
    stored     INTEGER NOT NULL CHECK (stored >= 0)
);

CREATE INDEX session_heads_by_head ON session_heads (namespace, head);
