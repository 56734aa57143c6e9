-- 0005: results and progress.
--
-- result    a done job's result (json, as the worker wrote it), for a job that declares a result
--           type; written by the fenced ack that completes the row (ack_results), so a worker
--           that lost its claim writes none. Deleted with the row by retention.
-- progress  the last progress a running job's handler reported (ctx.progress), written by the
--           heartbeat; kept after the job ends.
ALTER TABLE {table} ADD COLUMN result json, ADD COLUMN progress jsonb;

-- A job that ends failed or cancelled (a dead letter, a lost crash loop, an expiry, a cancel)
-- is announced on <schema>_results with its id, so the callers awaiting its result are woken
-- whichever statement ended it. A success of a job with a result is announced by ack_results
-- itself; other successes are not announced (no cost on the plain ack).
CREATE FUNCTION {ended_function}() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(left(TG_TABLE_SCHEMA || '_results', 63), NEW.id::text);
    RETURN NULL;
END
$$;
CREATE TRIGGER {ended_trigger} AFTER UPDATE OF status ON {table}
    FOR EACH ROW
    WHEN (NEW.status IN ('failed', 'cancelled') AND OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION {ended_function}();
