-- 0018: flow limits set at run time (queuey queues limit, the dashboard, Admin.set_limits).
--
-- One row per queue whose limits an operator set: limits (claim_limited's JSON, the limits of
-- the queue and of its job types) replace the declared ones from the next claim of every
-- process on, until the row is deleted (the declared limits again). shown is their spelling
-- (queuey.limits.parse_limit), set_by and set_at who set them and when (also in the audit log).
CREATE TABLE IF NOT EXISTS {flow_set} (
    kind   text NOT NULL,
    queue  text NOT NULL,
    limits json NOT NULL,
    shown  text NOT NULL,
    set_by text NOT NULL,
    set_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, queue)
);
