-- 0012: every failed attempt's error, kept with its row: a JSON array of records (attempt,
-- type, message, traceback, at, worker), oldest first, the latest few kept (the statements that
-- record a retry or a dead letter append one and cut the array; queuey.attempts has the
-- bounds). NULL until an attempt fails. Adding a nullable column without a default rewrites
-- nothing, so this is instant on a large table.
ALTER TABLE {table} ADD COLUMN IF NOT EXISTS errors jsonb;
