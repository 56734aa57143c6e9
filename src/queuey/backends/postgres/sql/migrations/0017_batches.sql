-- 0017: batches of jobs (queuey.workflows.batch) and their callbacks.
--
-- A member of a batch carries its batch's id (column batch, and the header queuey-batch for its
-- handler). <table>_batches keeps one row per batch: total members, how many have not ended
-- (pending), succeeded (done) and ended otherwise (failed), and the ids of its callbacks, rows
-- in the 'waiting' status until the batch ends. Every statement that ends a row (ack,
-- ack_results, complete, dead_letter, cancel, finish_cancel, reclaim) counts its members in
-- the same statement; the one that brings pending to zero releases the callbacks (concurrent
-- ends serialize on the batch's row, so exactly one does). Adding members raises pending first
-- and is refused once it is zero.
ALTER TABLE {table} ADD COLUMN batch uuid;
CREATE TABLE {batches} (
    id          uuid PRIMARY KEY,
    total       integer NOT NULL,
    pending     integer NOT NULL,
    done        integer NOT NULL DEFAULT 0,
    failed      integer NOT NULL DEFAULT 0,
    on_success  uuid,
    on_complete uuid,
    created_at  timestamptz NOT NULL DEFAULT now(),
    ended_at    timestamptz
);
