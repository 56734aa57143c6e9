-- Every statement the dashboard runs, by name (loaded by backends/postgres/_dashboard.py).
-- {table} is the message table, {audit} and {paused} the tables of migration 0004,
-- {signed_out} and {bulk} those of 0006, {schedules} that of 0002 (and the tables the parts of
-- queries.sql name), all composed with psycopg.sql.Identifier. The actions run the parts the
-- command line's statements are made of (cancel_job, retry_rows, discard_rows), so the two
-- never differ. Each page's statement reads through an index (the
-- dashboard's (kind, queue, status, seq), the partial indexes of 0001, or a primary key);
-- tests/integration/postgres/test_dashboard_plans.py shows the plans on a million rows.
-- Columns are named: rows are read into dataclasses by name, never by position.

-- part: queue_scan
-- Every (kind, queue) with rows (found), by two skip scans (one probe per queue, however many
-- rows): over the dashboard index for running, failed and done rows, over the claim's index
-- for pending ones.
settled AS (
    (SELECT kind, queue FROM {table} WHERE status <> 'pending' ORDER BY kind, queue LIMIT 1)
    UNION ALL
    SELECT next.kind, next.queue
    FROM settled, LATERAL (
        SELECT m.kind, m.queue FROM {table} AS m
        WHERE status <> 'pending' AND (m.kind, m.queue) > (settled.kind, settled.queue)
        ORDER BY m.kind, m.queue
        LIMIT 1
    ) AS next
), waiting AS (
    (SELECT kind, queue FROM {table} WHERE status = 'pending' ORDER BY kind, queue LIMIT 1)
    UNION ALL
    SELECT next.kind, next.queue
    FROM waiting, LATERAL (
        SELECT m.kind, m.queue FROM {table} AS m
        WHERE status = 'pending' AND (m.kind, m.queue) > (waiting.kind, waiting.queue)
        ORDER BY m.kind, m.queue
        LIMIT 1
    ) AS next
), found AS (
    SELECT kind, queue FROM settled UNION SELECT kind, queue FROM waiting
)

-- part: scanned_columns
-- The columns a page reads of each row it scanned (m), and how far the read went.
m.seq, m.id, m.kind, m.queue, m.job_type, m.status, m.attempts, m.available_at,
m.processed_at, m.claimed_by, m.error, m.payload,
min(m.seq) OVER () AS scan_floor, count(*) OVER () AS scanned

-- part: page_rows
-- The rows of a page among those scanned: of the job type (NULL: any), the due filter
-- (%(due)s: NULL any, true due now, false scheduled) and the text (found, case-insensitively,
-- in the id, job type, error or payload; '' matches all), newest first, at most %(limit)s.
SELECT seq, id::text AS id, kind, queue, job_type, status, attempts, available_at,
       processed_at, claimed_by, split_part(coalesce(error, ''), E'\n', 1) AS error,
       scan_floor, scanned
FROM scanned
WHERE (%(job_type)s::text IS NULL OR job_type = %(job_type)s::text)
  AND (%(due)s::boolean IS NULL OR (available_at <= now()) = %(due)s::boolean)
  AND strpos(lower(id::text || ' ' || job_type || ' ' || coalesce(error, '') || ' '
                   || payload::text), lower(%(text)s::text)) > 0
ORDER BY seq DESC
LIMIT %(limit)s

-- name: queues
-- Every (kind, queue) with rows, by two skip scans (one probe per queue, however many rows):
-- over the dashboard index for running, failed and done rows, over the claim's index for
-- pending ones; plus the queues an operator paused. Topic apps (kind 'app') are not queues.
WITH RECURSIVE {queue_scan}
SELECT kind, queue FROM found
UNION
SELECT kind, queue FROM {paused} WHERE kind <> 'app'
ORDER BY kind, queue;

-- name: overview
-- Per queue: due and scheduled rows and the oldest due row's wait in seconds (the claim's
-- partial index), running, failed and done rows (the dashboard index, index only; each count
-- stops at %(cap)s, so a million done rows cost no more than cap), and whether it is paused.
WITH queues AS (
    SELECT * FROM unnest(%(kinds)s::text[], %(queues)s::text[]) AS q(kind, queue)
)
SELECT q.kind, q.queue, %(cap)s::int AS cap,
       coalesce(p.due, 0) AS due,
       coalesce(p.scheduled, 0) AS scheduled,
       p.oldest_secs,
       (SELECT count(*) FROM (SELECT 1 FROM {table} AS m
                              WHERE m.kind = q.kind AND m.queue = q.queue
                                AND m.status = 'running' LIMIT %(cap)s) AS c) AS running,
       (SELECT count(*) FROM (SELECT 1 FROM {table} AS m
                              WHERE m.kind = q.kind AND m.queue = q.queue
                                AND m.status = 'failed' LIMIT %(cap)s) AS c) AS failed,
       (SELECT count(*) FROM (SELECT 1 FROM {table} AS m
                              WHERE m.kind = q.kind AND m.queue = q.queue
                                AND m.status = 'done' LIMIT %(cap)s) AS c) AS done,
       EXISTS (SELECT 1 FROM {paused} AS z
               WHERE z.kind = q.kind AND z.queue = q.queue) AS paused
FROM queues AS q
LEFT JOIN LATERAL (
    SELECT count(*) FILTER (WHERE m.available_at <= now()) AS due,
           count(*) FILTER (WHERE m.available_at > now()) AS scheduled,
           extract(epoch FROM now() - min(m.available_at)
                                     FILTER (WHERE m.available_at <= now()))::float8
               AS oldest_secs
    FROM {table} AS m
    WHERE m.status = 'pending' AND m.kind = q.kind AND m.queue = q.queue
) AS p ON true
ORDER BY q.kind, q.queue;

-- name: throughput
-- Rows done and rows failed per minute over the last hour (60 buckets, oldest first), from
-- the partial indexes on processed_at.
WITH minutes AS (
    SELECT generate_series(date_trunc('minute', now()) - interval '59 minutes',
                           date_trunc('minute', now()), interval '1 minute') AS minute
), done AS (
    SELECT date_trunc('minute', processed_at) AS minute, count(*) AS n FROM {table}
    WHERE status = 'done' AND processed_at >= date_trunc('minute', now()) - interval '59 minutes'
    GROUP BY 1
), failed AS (
    SELECT date_trunc('minute', processed_at) AS minute, count(*) AS n FROM {table}
    WHERE status = 'failed'
      AND processed_at >= date_trunc('minute', now()) - interval '59 minutes'
    GROUP BY 1
)
SELECT minutes.minute, coalesce(done.n, 0) AS done, coalesce(failed.n, 0) AS failed
FROM minutes LEFT JOIN done USING (minute) LEFT JOIN failed USING (minute)
ORDER BY minutes.minute;

-- name: list_queue
-- One page of one queue's rows of one status, newest first, older than seq %(before)s. At most
-- %(scan)s rows are read from the dashboard index (pending rows: from the claim's index, whose
-- entries of the queue are sorted by seq, so that read grows with the queue's backlog); of those, the rows matching the job type
-- (NULL: any), the due filter (%(due)s: NULL any, true due now, false scheduled) and the text
-- (found, case-insensitively, in the id, job type, error or payload; '' matches all) are
-- returned, at most %(limit)s. scan_floor and scanned say how far the read went, so the
-- next page continues there even when few rows matched.
WITH scanned AS MATERIALIZED (
    SELECT {scanned_columns}
    FROM (SELECT * FROM {table}
          WHERE kind = %(kind)s AND queue = %(queue)s AND status = %(status)s
            AND seq < %(before)s
          ORDER BY seq DESC
          LIMIT %(scan)s) AS m
)
{page_rows};

-- name: list_all
-- The same page across every queue: each queue's newest rows of the status (one index-only
-- range per queue, at most %(scan)s each), merged newest first and cut to %(scan)s, then read
-- (one index probe each) and filtered as in list_queue.
WITH RECURSIVE {queue_scan}, newest AS (
    SELECT r.kind, r.queue, r.seq FROM found, LATERAL (
        SELECT t.kind, t.queue, t.seq FROM {table} AS t
        WHERE t.kind = found.kind AND t.queue = found.queue
          AND t.status = %(status)s AND t.seq < %(before)s
        ORDER BY t.seq DESC
        LIMIT %(scan)s) AS r
    ORDER BY r.seq DESC
    LIMIT %(scan)s
), scanned AS MATERIALIZED (
    SELECT {scanned_columns}
    FROM newest JOIN {table} AS m
      ON m.kind = newest.kind AND m.queue = newest.queue AND m.status = %(status)s
     AND m.seq = newest.seq
)
{page_rows};

-- name: job
-- One row by id (the primary key), whatever its status.
SELECT id::text AS id, seq, kind, queue, job_type, status, priority, attempts, redeliveries,
       deferrals, payload::text AS payload, headers::text AS headers, published_by,
       enqueued_at_ms, created_at, available_at, expires_at, claimed_at, claimed_by,
       lease_until, processed_at, error, coalesce(errors, '[]'::jsonb) AS errors,
       progress::text AS progress, result::text AS result
FROM {table}
WHERE id = %(id)s::uuid;

-- name: never_built
-- Whether %(id)s is a workflow step that never ran (its payload never built: an upstream step
-- failed, or it was cancelled while waiting); a retry leaves it alone, as ops_retry does.
SELECT id::text AS id FROM {table}
WHERE id = %(id)s::uuid AND jsonb_typeof(step) = 'object'
  AND (payload -> '__queuey_step__') IS NULL;

-- name: key_holder
-- The job other than %(id)s holding that row's unique key (a retry leaves the row alone then).
SELECT h.id::text AS id
FROM {table} AS m JOIN {table} AS h ON h.unique_key = m.unique_kept AND h.id <> m.id
WHERE m.id = %(id)s::uuid;

-- name: fan_out
-- A topic row's publication: the rows one publish wrote (same topic, same transaction time,
-- same publisher; their seq values are close), one per subscriber. Settled rows come from the
-- dashboard index, pending ones from the claim's.
SELECT m.id::text AS id, m.job_type, m.status, m.attempts, m.processed_at,
       split_part(coalesce(m.error, ''), E'\n', 1) AS error, m.seq
FROM {table} AS m
WHERE m.kind = 'topic' AND m.queue = %(queue)s
  AND m.status IN ('running', 'done', 'failed')
  AND m.seq BETWEEN %(seq)s - 1000 AND %(seq)s + 1000
  AND m.created_at = %(created_at)s AND m.published_by = %(published_by)s
UNION ALL
SELECT m.id::text AS id, m.job_type, m.status, m.attempts, m.processed_at,
       split_part(coalesce(m.error, ''), E'\n', 1) AS error, m.seq
FROM {table} AS m
WHERE m.kind = 'topic' AND m.queue = %(queue)s AND m.status = 'pending'
  AND m.seq BETWEEN %(seq)s - 1000 AND %(seq)s + 1000
  AND m.created_at = %(created_at)s AND m.published_by = %(published_by)s
ORDER BY seq;

-- name: publications
-- A topic's newest rows older than seq %(before)s, every status, at most %(limit)s: one arm per
-- status with the status written out, so each can use its index (the dashboard's for settled
-- rows, the claim's for pending ones), merged newest first. The caller groups the rows into
-- publications.
SELECT seq, id::text AS id, job_type, status, attempts, published_by, created_at,
       processed_at, split_part(coalesce(error, ''), E'\n', 1) AS error
FROM (
    (SELECT * FROM {table}
     WHERE kind = 'topic' AND queue = %(topic)s AND status = 'done' AND seq < %(before)s
     ORDER BY seq DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM {table}
     WHERE kind = 'topic' AND queue = %(topic)s AND status = 'failed' AND seq < %(before)s
     ORDER BY seq DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM {table}
     WHERE kind = 'topic' AND queue = %(topic)s AND status = 'running' AND seq < %(before)s
     ORDER BY seq DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT * FROM {table}
     WHERE kind = 'topic' AND queue = %(topic)s AND status = 'pending' AND seq < %(before)s
     ORDER BY seq DESC LIMIT %(limit)s)
) AS r
ORDER BY seq DESC
LIMIT %(limit)s;

-- name: audit
-- The audit log, newest first, older than id %(before)s (the primary key).
SELECT id, at, actor, action, kind, queue, job_id::text AS job_id, filter, count
FROM {audit}
WHERE id < %(before)s
ORDER BY id DESC
LIMIT %(limit)s;

-- name: paused
-- Every paused queue and topic app.
SELECT kind, queue, paused_by, paused_at FROM {paused} ORDER BY kind, queue;

-- name: schedules
-- Every periodic schedule workers registered (the table of migration 0002), by name.
SELECT name, expression, tz, last_slot, last_fired_at, last_job_id::text AS last_job_id, paused
FROM {schedules}
ORDER BY name;

-- name: unique_keys
-- The unique keys held now (a row keeps its key only while it is in a state its job refuses a
-- duplicate in), in key order through the partial unique index, at most %(limit)s.
SELECT unique_key, id::text AS id, kind, queue, job_type, status, created_at
FROM {table}
WHERE unique_key IS NOT NULL
ORDER BY unique_key
LIMIT %(limit)s;

-- Actions. Each is one statement, so one transaction: the change, its audit row (written
-- even when nothing matched, with count 0; not for a bulk confirmation already used) and
-- the notification waking workers commit
-- together or not at all.

-- part: failed_filter
-- The failed rows a bulk action's filter names (as the job list's filter reads it): of the
-- queue %(kind)s:%(queue)s (NULL: every queue), of the job type (NULL: any), with the text in
-- the id, job type, error or payload ('' matches all).
(%(kind)s::text IS NULL OR (kind = %(kind)s::text AND queue = %(queue)s::text))
AND (%(job_type)s::text IS NULL OR job_type = %(job_type)s::text)
AND strpos(lower(id::text || ' ' || job_type || ' ' || coalesce(error, '') || ' '
                 || payload::text), lower(%(text)s::text)) > 0

-- part: asked_rows
-- The rows a retry or a discard acts on: the row %(id)s (failed or cancelled) when not NULL,
-- else every failed row of the filter among the ids the confirmation %(token)s counted
-- (bulk_snapshot), which it takes once (taken: `found` says whether it was still there).
taken AS (
    DELETE FROM {bulk}
    WHERE token = %(token)s::text AND actor = %(actor)s AND action = %(action)s
      AND until > now()
    RETURNING ids
), asked AS (
    SELECT id, seq, unique_kept, step, payload FROM {table}
    WHERE (%(id)s::uuid IS NOT NULL AND id = %(id)s::uuid AND status IN ('failed', 'cancelled'))
       OR (%(id)s::uuid IS NULL AND status = 'failed' AND {failed_filter}
           AND id = ANY(coalesce((SELECT ids FROM taken), '{{}}')))
)

-- part: action_logged
-- The audit row of a retry or a discard (after asked_rows and touched: kind, queue), written
-- even when nothing matched (count 0), not for a bulk confirmation already used.
logged AS (
    INSERT INTO {audit} (actor, action, kind, queue, job_id, filter, count)
    SELECT %(actor)s, %(action)s,
           CASE WHEN %(id)s::uuid IS NULL THEN %(kind)s::text ELSE min(kind) END,
           CASE WHEN %(id)s::uuid IS NULL THEN %(queue)s::text ELSE min(queue) END,
           %(id)s::uuid, %(filter)s, count(*)
    FROM touched
    HAVING %(token)s::text IS NULL OR (SELECT count(*) FROM taken) > 0
)

-- name: retry
-- The rows asked for (asked_rows) retried as `queuey failed retry` retries them (retry_rows,
-- from queries.sql); audited, and each queue's workers woken on its channel.
WITH RECURSIVE {asked_rows}, {retry_rows}, {action_logged}, woken AS (
    SELECT pg_notify(CASE WHEN w.kind = 'topic' THEN %(topic_channel)s
                          ELSE %(job_channel)s END, w.queue) AS notified
    FROM (SELECT DISTINCT kind, queue FROM touched) AS w
)
SELECT (SELECT count(*) FROM touched) AS count, (SELECT count(*) FROM woken) AS woken,
       (SELECT count(*) FROM taken) AS found;

-- name: discard
-- The rows asked for (asked_rows) deleted as `queuey failed discard` deletes them
-- (discard_rows, from queries.sql); audited.
WITH {asked_rows}, {discard_rows}, {action_logged}
SELECT (SELECT count(*) FROM touched) AS count, (SELECT count(*) FROM taken) AS found;

-- name: pause
-- Pause a queue (kind 'job' or 'topic') or a topic app (kind 'app', queue = its prefix).
WITH added AS (
    INSERT INTO {paused} (kind, queue, paused_by) VALUES (%(kind)s, %(queue)s, %(actor)s)
    ON CONFLICT (kind, queue) DO NOTHING
    RETURNING 1
)
INSERT INTO {audit} (actor, action, kind, queue, filter, count)
SELECT %(actor)s, 'pause', %(kind)s, %(queue)s, '', count(*) FROM added
RETURNING count;

-- name: resume
-- Resume what pause paused, and wake its consumers at once: a queue's on its channel (named in
-- the payload), a topic app's every consumer on the topic channel (an empty payload).
WITH removed AS (
    DELETE FROM {paused} WHERE kind = %(kind)s AND queue = %(queue)s
    RETURNING 1
), woken AS (
    SELECT pg_notify(CASE WHEN %(kind)s = 'job' THEN %(job_channel)s ELSE %(topic_channel)s END,
                     CASE WHEN %(kind)s = 'app' THEN '' ELSE %(queue)s END) AS notified
    FROM (SELECT 1 FROM removed LIMIT 1) AS one
)
INSERT INTO {audit} (actor, action, kind, queue, filter, count)
SELECT %(actor)s, 'resume', %(kind)s, %(queue)s, '', count(*) FROM removed
WHERE (SELECT count(*) FROM woken) >= 0
RETURNING count;

-- name: cancel
-- Cancel the job %(id)s as `queuey jobs cancel` does (cancel_job, from queries.sql: a waiting
-- workflow step too, and the steps after it fail with it or get its error; a running one's
-- worker is told on %(channel)s). Audited; returns 1 or 0.
WITH RECURSIVE {cancel_job}
INSERT INTO {audit} (actor, action, kind, queue, job_id, filter, count)
SELECT %(actor)s, 'cancel', min(kind), min(queue), %(id)s::uuid, '', count(*)
FROM job_cancelled
RETURNING count;

-- Bulk confirmations and signed-out sessions (migration 0006).

-- name: bulk_snapshot
-- Remember the ids of every failed row of the filter (failed_filter) under %(token)s for
-- %(actor)s and %(action)s until %(secs)s seconds from now; returns how many. Drops the
-- confirmations past their time on the way.
WITH purged AS (
    DELETE FROM {bulk} WHERE until <= now()
), matched AS (
    SELECT coalesce(array_agg(id), '{{}}') AS ids FROM {table}
    WHERE status = 'failed' AND {failed_filter}
)
INSERT INTO {bulk} (token, actor, action, ids, until)
SELECT %(token)s, %(actor)s, %(action)s, ids, now() + make_interval(secs => %(secs)s)
FROM matched
RETURNING cardinality(ids) AS count;

-- name: sign_out
-- Record the session %(session)s as signed out until %(until)s (seconds since the epoch, when
-- it would have ended anyway); drops the records past their time on the way.
WITH purged AS (
    DELETE FROM {signed_out} WHERE until <= now()
)
INSERT INTO {signed_out} (session, until) VALUES (%(session)s, to_timestamp(%(until)s))
ON CONFLICT (session) DO NOTHING;

-- name: signed_out
-- Whether the session %(session)s was signed out.
SELECT EXISTS (SELECT 1 FROM {signed_out} WHERE session = %(session)s) AS gone;

-- name: set_limits
-- Put %(limits)s (claim_limited's JSON, the limits of the queue and of its job types) in place
-- of a queue's declared limits, in force at the next claim of every process (NULL: back to the
-- declared ones), and wake its consumers. Audited: who, when, and what, old -> new (spelt as
-- queuey.limits.parse_limit reads them: %(shown)s; 'declared' for the declared limits).
WITH old AS (
    SELECT shown FROM {flow_set} WHERE kind = %(kind)s AND queue = %(queue)s
), gone AS (
    DELETE FROM {flow_set}
    WHERE kind = %(kind)s AND queue = %(queue)s AND %(limits)s::json IS NULL
    RETURNING 1
), put AS (
    INSERT INTO {flow_set} (kind, queue, limits, shown, set_by)
    SELECT %(kind)s, %(queue)s, %(limits)s::json, %(shown)s, %(actor)s
    WHERE %(limits)s::json IS NOT NULL
    ON CONFLICT (kind, queue) DO UPDATE
    SET limits = excluded.limits, shown = excluded.shown, set_by = excluded.set_by, set_at = now()
    RETURNING 1
), woken AS (
    SELECT pg_notify(CASE WHEN %(kind)s = 'job' THEN %(job_channel)s ELSE %(topic_channel)s END,
                     %(queue)s) AS notified
)
INSERT INTO {audit} (actor, action, kind, queue, filter, count)
SELECT %(actor)s, 'set limits', %(kind)s, %(queue)s,
       coalesce((SELECT shown FROM old), 'declared') || ' -> ' || %(shown)s, 1
WHERE (SELECT count(*) FROM woken) >= 0
RETURNING filter;

-- name: limits_set
-- Every queue whose limits were set at run time: what, by whom, when.
SELECT kind, queue, shown, set_by, set_at FROM {flow_set} ORDER BY kind, queue;

-- name: flow_queues
-- Every queue with flow limits, declared by its workers ({flow_declared}) or set at run time
-- ({flow_set}, which wins): the declared limits (claim_limited's JSON, what flow_keys is given),
-- the limits in force spelt, where they come from, and whether the queue is paused.
SELECT coalesce(s.kind, d.kind) AS kind, coalesce(s.queue, d.queue) AS queue,
       coalesce(d.limits::text, '[]') AS declared, coalesce(s.shown, d.shown) AS shown,
       CASE WHEN s.queue IS NULL THEN 'declared' ELSE 'set' END AS source,
       EXISTS (SELECT 1 FROM {paused} AS z
               WHERE z.kind = coalesce(s.kind, d.kind)
                 AND z.queue = coalesce(s.queue, d.queue)) AS paused
FROM {flow_set} AS s FULL JOIN {flow_declared} AS d ON d.kind = s.kind AND d.queue = s.queue
ORDER BY 1, 2;

-- name: unknown_names
-- What an operator names that this table does not know: 'queue' when no row of the queue (kind
-- 'job' or 'topic', in any state), no declared or set limits and no pause name it; then each of
-- %(job_types)s that no row of the queue has (a probe by state, through the claim's and the
-- dashboard's indexes, reading until one row of the type is found).
SELECT 'queue' AS name
WHERE NOT EXISTS (SELECT 1 FROM {table} WHERE status = 'pending' AND kind = %(kind)s AND queue = %(queue)s)
  AND NOT EXISTS (SELECT 1 FROM {table}
                  WHERE status IN ('running', 'failed', 'done', 'cancelled')
                    AND kind = %(kind)s AND queue = %(queue)s)
  AND NOT EXISTS (SELECT 1 FROM {flow_declared} WHERE kind = %(kind)s AND queue = %(queue)s)
  AND NOT EXISTS (SELECT 1 FROM {flow_set} WHERE kind = %(kind)s AND queue = %(queue)s)
  AND NOT EXISTS (SELECT 1 FROM {paused} WHERE kind = %(kind)s AND queue = %(queue)s)
UNION ALL
SELECT t.job_type FROM unnest(%(job_types)s::text[]) AS t (job_type)
WHERE NOT EXISTS (SELECT 1 FROM {table}
                  WHERE kind = %(kind)s AND queue = %(queue)s AND job_type = t.job_type)
  AND NOT EXISTS (SELECT 1 FROM {flow_declared}
                  WHERE kind = %(kind)s AND queue = %(queue)s AND strpos(limits::text, '"' || t.job_type || '"') > 0);
