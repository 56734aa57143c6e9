-- 0003: the cancelled status, a terminal state like failed: a cancelled row is never claimed,
-- never pruned, and stays for a person (listed, retried or discarded like a failed one).
--
-- The status CHECK of 0001 was unnamed (PostgreSQL named it); it is replaced by a named one
-- whatever name it got, so later migrations can drop it by name.
DO $$
DECLARE
    found text;
BEGIN
    FOR found IN
        SELECT conname FROM pg_constraint
        WHERE conrelid = '{table}'::regclass AND contype = 'c'
          AND pg_get_constraintdef(oid) LIKE '%status%'
    LOOP
        EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', '{table}'::regclass, found);
    END LOOP;
END
$$;
ALTER TABLE {table} ADD CONSTRAINT {status_check}
    CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled'));
-- Operators: cancelled rows per queue.
CREATE INDEX {cancelled_index} ON {table} (kind, queue, processed_at) WHERE status = 'cancelled';
