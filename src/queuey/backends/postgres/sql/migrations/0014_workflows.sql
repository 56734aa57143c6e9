-- 0014: workflows (queuey.workflows): chains and fan-ins of typed steps.
--
-- A step whose parents have not all ended is a row in the new 'waiting' status: never claimed,
-- never pruned. workflow   the workflow it belongs to (every step of one workflow shares it)
--            parents_left how many of its parents have not ended yet
--            step         how its input is built once they have (builder name, many)
--            inputs       its parents' results (or errors) so far, keyed by position
-- The edges (parent -> child at a position, with the fan-in's failure policy) live in
-- <table>_workflow_edges until the parent ends. The statement that ends a parent (ack_results,
-- dead_letter) decrements its children's parents_left in the same statement, so in the same
-- transaction: a child whose count reaches zero becomes pending with its inputs, exactly once
-- (concurrent completions serialize on the child's row).
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
    CHECK (status IN ('pending', 'running', 'done', 'failed', 'cancelled', 'waiting'));
ALTER TABLE {table} ADD COLUMN workflow uuid, ADD COLUMN parents_left integer,
    ADD COLUMN step jsonb, ADD COLUMN inputs jsonb;
CREATE INDEX {workflow_index} ON {table} (workflow) WHERE workflow IS NOT NULL;
CREATE TABLE {workflow_edges} (
    parent   uuid NOT NULL,
    child    uuid NOT NULL,
    position integer NOT NULL,
    policy   text NOT NULL CHECK (policy IN ('fail', 'partial')),
    PRIMARY KEY (parent, child)
);
