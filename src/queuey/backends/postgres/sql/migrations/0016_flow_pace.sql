-- 0016: rate limits keep a pace per key (queuey.limits.RateLimit: a token bucket) instead of a
-- ledger of starts.
--
-- One row per (kind, queue, bucket, key): bucket names the rate limit (its scope, limit and
-- window) and key the row's key (its key fields' values as a JSON array); tat is the
-- theoretical time of the key's next start at the limit's even pace (seconds since the epoch).
-- A key may start now while tat is at most burst starts ahead of now; each start moves tat one
-- spacing (per / limit) past the later of tat and now. A row whose tat has passed says nothing
-- (as if absent): claim_limited deletes those of keys it does not touch.
CREATE TABLE IF NOT EXISTS {flow_pace} (
    kind   text NOT NULL,
    queue  text NOT NULL,
    bucket text NOT NULL,
    key    text NOT NULL,
    tat    float8 NOT NULL,
    PRIMARY KEY (kind, queue, bucket, key)
);
CREATE INDEX IF NOT EXISTS {pace_age_index} ON {flow_pace} (kind, queue, tat);
DROP TABLE IF EXISTS {flow_starts};
