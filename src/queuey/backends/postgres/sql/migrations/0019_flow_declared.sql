-- 0019: the flow limits workers declare, recorded for the dashboard's Flow limits page.
--
-- One row per queue with declared limits (queuey.limits: the queue's and its job types'), as
-- claim_limited reads them (limits) and spelt (shown); written by a worker when it declares its
-- queues (the latest declaration wins). The claim never reads it: a worker passes its own
-- declared limits with every claim.
CREATE TABLE IF NOT EXISTS {flow_declared} (
    kind        text NOT NULL,
    queue       text NOT NULL,
    limits      json NOT NULL,
    shown       text NOT NULL,
    declared_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (kind, queue)
);
