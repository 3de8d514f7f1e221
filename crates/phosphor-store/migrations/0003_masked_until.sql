-- Phosphor session store, schema version 3.
--
-- Observation masking: the tool outputs of the history up to and including `masked_until` are
-- shown to a model as one-line placeholders. The messages themselves are never changed.

ALTER TABLE sessions ADD COLUMN masked_until TEXT NULL REFERENCES messages (id);
