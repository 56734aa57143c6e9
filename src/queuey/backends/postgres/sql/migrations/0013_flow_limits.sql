-- 0013: flow limits (queuey.limits), enforced by claim_limited.
--
-- The ledger of recent starts of rate-limited rows: one row per start per (ledger, key), where
-- ledger names the limit's scope (job type and key fields; the windows of one key share it) and
-- key is the row's key (its key fields' values as a JSON array). claim_limited counts a key's
-- starts within each window, inserts the starts it makes and deletes the ones older than the
-- queue's longest window.
CREATE TABLE IF NOT EXISTS {flow_starts} (
    kind       text NOT NULL,
    queue      text NOT NULL,
    ledger     text NOT NULL,
    key        text NOT NULL,
    started_at timestamptz NOT NULL
);
CREATE INDEX IF NOT EXISTS {starts_index} ON {flow_starts} (kind, queue, ledger, key, started_at);
CREATE INDEX IF NOT EXISTS {starts_age_index} ON {flow_starts} (kind, queue, started_at);
-- Concurrency caps count the running rows of a queue by key.
CREATE INDEX IF NOT EXISTS {running_index} ON {table} (kind, queue) WHERE status = 'running';
