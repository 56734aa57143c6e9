-- 0004: what the dashboard needs (numbers 0002 and 0003 are other work; a gap is fine: the
-- runner applies every version above the current one, in order).
--
-- {table}_audit    one row per dashboard action: who, what, when, on which rows, how many
-- {table}_paused   the queues (kind 'job' or 'topic') and topic apps (kind 'app', queue = the
--                  app's prefix) an operator paused; consumers that follow it stop claiming
-- {table}_dashboard  the job lists: one queue's running, failed or done rows, newest first
--                  (keyset on seq); its (kind, queue) prefix also lists the queues by a skip
--                  scan. Pending rows are left out on purpose: they have the claim's index,
--                  and an index the claim could also use would let the planner pick it for
--                  the claim (then sorting the whole backlog) when statistics are stale.
--
-- Names derive from the message table's, as the indexes of 0001 do; the statement finds that
-- table through its quoted, validated name, so no user input is pasted. Building the index
-- takes a write lock on the table for as long as it takes (seconds per million rows).
DO $migration$
DECLARE
    schema_name name;
    table_name  name;
BEGIN
    SELECT n.nspname, c.relname INTO schema_name, table_name
    FROM pg_class AS c JOIN pg_namespace AS n ON n.oid = c.relnamespace
    WHERE c.oid = '{table}'::regclass;

    EXECUTE format(
        'CREATE TABLE %I.%I (
            id      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            at      timestamptz NOT NULL DEFAULT now(),
            actor   text NOT NULL,
            action  text NOT NULL,
            kind    text,
            queue   text,
            job_id  uuid,
            filter  text NOT NULL DEFAULT '''',
            count   integer NOT NULL DEFAULT 0
        )', schema_name, left(table_name || '_audit', 63));

    EXECUTE format(
        'CREATE TABLE %I.%I (
            kind       text NOT NULL CHECK (kind IN (''job'', ''topic'', ''app'')),
            queue      text NOT NULL,
            paused_by  text NOT NULL,
            paused_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (kind, queue)
        )', schema_name, left(table_name || '_paused', 63));

    EXECUTE format(
        'CREATE INDEX %I ON %I.%I (kind, queue, status, seq) WHERE status <> ''pending''',
        left(table_name || '_dashboard', 63), schema_name, table_name);
END
$migration$;
