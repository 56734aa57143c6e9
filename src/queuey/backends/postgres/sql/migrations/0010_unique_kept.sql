-- 0010: a unique job keeps its own key for its whole life (unique_kept), so a job that comes
-- back to pending (a retry, a deferral, a lost lease, an operator's retry) takes its key back:
-- one rule for every path (docs: "Unique jobs").
--
-- unique_kept  the key the row was enqueued with (its period bucket included); unique_key is
--              the held copy, NULL while released. A running holder of a debounced job
--              (on_conflict = replace, refusing pending and running only) holds
--              unique_kept || '#running' instead, so one pending successor can wait behind it.
--
-- Adding a nullable column rewrites nothing; rows holding a key now keep a copy of it.
ALTER TABLE {table} ADD COLUMN unique_kept text;
UPDATE {table} SET unique_kept = unique_key WHERE unique_key IS NOT NULL;
