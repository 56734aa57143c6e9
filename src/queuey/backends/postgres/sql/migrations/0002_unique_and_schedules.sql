-- 0002: unique jobs, topic idempotency keys and periodic schedules.
--
-- unique_key     a unique job's key (job type, queue, field values, period bucket), set while
--                the row is in one of the states its job refuses a duplicate in, NULL otherwise
--                (and always NULL for a job declared without unique): the statements that move
--                a row into a state outside the set release it, for good
-- unique_states  the refused states as a bitmask (pending 1, running 2, done 4, failed 8; 16
--                marks on_conflict = replace); 0 for a job declared without unique
--
-- Adding a column with a constant default rewrites nothing. The unique index is partial: rows
-- without a key (every plain job) are not in it, so a plain insert does no extra work.
ALTER TABLE {table}
    ADD COLUMN unique_key text,
    ADD COLUMN unique_states smallint NOT NULL DEFAULT 0;
CREATE UNIQUE INDEX {unique_index} ON {table} (unique_key) WHERE unique_key IS NOT NULL;

-- A topic publication's idempotency key (the HTTP Idempotency-Key header, publish(key=...)):
-- the first publication's message ids and the fingerprint of its topic and body. A key older
-- than the publisher's window is forgotten (overwritten by its next use, swept meanwhile).
CREATE TABLE {idempotency} (
    key         text PRIMARY KEY,
    fingerprint text NOT NULL,
    ids         uuid[] NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX {idempotency_age_index} ON {idempotency} (created_at);

-- Periodic schedules as every worker and `queuey schedules` see them: the newest slot fired
-- (the unique key of each slot makes it fire once; this only remembers how far they got) and
-- whether an operator paused it.
CREATE TABLE {schedules} (
    name          text PRIMARY KEY,
    expression    text NOT NULL,
    tz            text NOT NULL,
    last_slot     timestamptz,
    last_fired_at timestamptz,
    last_job_id   uuid,
    paused        boolean NOT NULL DEFAULT false,
    updated_at    timestamptz NOT NULL DEFAULT now()
);
