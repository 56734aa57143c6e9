-- 0006: dashboard state that must hold across every process serving the dashboard (numbers
-- 0005 and up may be other work; a gap is fine: the runner applies every version not yet
-- applied, in order).
--
-- {table}_signed_out  one row per signed-out browser session until the session would have
--                     ended on its own: a replayed cookie of a session in it is refused
-- {table}_bulk        one row per bulk action shown on a confirmation page: the ids of the
--                     jobs it counted, so "Yes" acts on exactly those (deleted when used or
--                     past "until")
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
            session  text PRIMARY KEY,
            until    timestamptz NOT NULL
        )', schema_name, left(table_name || '_signed_out', 63));

    EXECUTE format(
        'CREATE TABLE %I.%I (
            token    text PRIMARY KEY,
            actor    text NOT NULL,
            action   text NOT NULL,
            ids      uuid[] NOT NULL,
            until    timestamptz NOT NULL
        )', schema_name, left(table_name || '_bulk', 63));
END
$migration$;
