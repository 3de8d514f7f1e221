-- Phosphor session store, schema version 2.
--
-- A summary written inside a turn folds that turn's earlier tool rounds but keeps the user
-- message that opened the turn verbatim: `pinned_message` names it, and the history shows it
-- right after the summary, before the messages stored after `summarized_until`.

ALTER TABLE messages ADD COLUMN pinned_message TEXT NULL REFERENCES messages (id)
    CHECK (pinned_message IS NULL OR is_summary = 1);
