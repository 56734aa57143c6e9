-- 0001: the message table shared by both faces of the engine (typed jobs and topics).
--
-- kind        'job' (queue = the queue name, job_type = the job's name) or
--             'topic' (queue = the topic, job_type = the subscriber function; '' = nobody)
-- attempts    runs started (a claim adds one; a deferral gives its run back)
-- redeliveries leases that expired while running (a lost worker); max_redeliveries ends it
-- claimed_by  the process holding the row while it runs; with attempts, the fencing token
-- payload     json, not jsonb: stored as sent (faster to insert, and \u0000 in a string is kept)
CREATE TABLE {table} (
    id             uuid PRIMARY KEY,
    seq            bigint GENERATED ALWAYS AS IDENTITY,
    kind           text NOT NULL CHECK (kind IN ('job', 'topic')),
    queue          text NOT NULL,
    job_type       text NOT NULL DEFAULT '',
    status         text NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'running', 'done', 'failed')),
    priority       smallint NOT NULL DEFAULT 0,
    attempts       integer NOT NULL DEFAULT 0,
    redeliveries   integer NOT NULL DEFAULT 0,
    deferrals      integer NOT NULL DEFAULT 0,
    payload        json NOT NULL,
    headers        json NOT NULL DEFAULT '{{}}',
    published_by   text NOT NULL DEFAULT '',
    enqueued_at_ms bigint NOT NULL DEFAULT 0,
    available_at   timestamptz NOT NULL DEFAULT now(),
    expires_at     timestamptz,
    claimed_at     timestamptz,
    claimed_by     text,
    lease_until    timestamptz,
    error          text,
    processed_at   timestamptz,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- The claim: pending rows of one queue in priority, due time, insertion order. Partial, so
-- done and failed rows never slow it down.
CREATE INDEX {claim_index} ON {table} (kind, queue, priority DESC, available_at, seq)
    WHERE status = 'pending';
-- Lease reclaim and heartbeat.
CREATE INDEX {lease_index} ON {table} (lease_until) WHERE status = 'running';
-- Retention sweep.
CREATE INDEX {done_index} ON {table} (processed_at) WHERE status = 'done';
-- Message TTL sweep.
CREATE INDEX {expiry_index} ON {table} (expires_at)
    WHERE status = 'pending' AND expires_at IS NOT NULL;
-- Operators: failed rows per queue.
CREATE INDEX {failed_index} ON {table} (kind, queue, processed_at) WHERE status = 'failed';
