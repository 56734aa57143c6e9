-- Every statement the PostgreSQL backend runs, by name. {table} is the schema-qualified message
-- table, composed with psycopg.sql.Identifier (never pasted from user input). A "part" is SQL
-- text several statements share: its code stands where a statement names it in braces. Times
-- use the database's clock (now()) only.

-- part: publish_rows
-- The INSERT of a batch of envelopes, pasted into publish and publish_once (a part is never
-- run alone): one array per column, payloads and headers as one JSON array each
-- (json_array_elements keeps each text exactly), joined by position n. A topic row with an
-- empty job_type records a publish nobody subscribes to: done at once.
INSERT INTO {table} (id, kind, queue, job_type, status, priority, attempts, deferrals,
                     payload, headers, published_by, enqueued_at_ms, available_at,
                     expires_at, processed_at)
SELECT r.id, r.kind, r.queue, r.job_type,
       CASE WHEN r.kind = 'topic' AND r.job_type = '' THEN 'done' ELSE 'pending' END,
       r.priority, r.attempt - 1, r.deferrals, p.payload, h.headers,
       r.published_by, r.enqueued_at_ms,
       now() + make_interval(secs => %(delay)s::float8),
       now() + make_interval(secs => %(delay)s::float8 + r.ttl),
       CASE WHEN r.kind = 'topic' AND r.job_type = '' THEN now() END
FROM unnest(%(ids)s::uuid[], %(kinds)s::text[], %(queues)s::text[], %(job_types)s::text[],
            %(priorities)s::int[], %(attempts)s::int[], %(deferrals)s::int[],
            %(published_by)s::text[], %(enqueued_at_ms)s::bigint[], %(ttls)s::float8[])
     WITH ORDINALITY
     AS r(id, kind, queue, job_type, priority, attempt, deferrals, published_by,
          enqueued_at_ms, ttl, n)
JOIN json_array_elements(%(payloads)s::json) WITH ORDINALITY AS p(payload, n) USING (n)
JOIN json_array_elements(%(headers)s::json) WITH ORDINALITY AS h(headers, n) USING (n)

-- name: publish
-- Insert envelopes (one array per column, one round trip) and wake listeners once per queue;
-- rows are inserted in the given order (FIFO within a batch).
WITH inserted AS (
    {publish_rows}
    ORDER BY n
    RETURNING queue, status
)
SELECT pg_notify(%(channel)s, q.queue)
FROM (SELECT DISTINCT queue FROM inserted WHERE status = 'pending') AS q;

-- name: publish_copy
-- Bulk insert of rows that need nothing computed on the server (due now, no message TTL, a
-- subscriber named): every other column takes its default (pending, due now(), no expiry). Run
-- inside a transaction with notify_queues, which wakes listeners once per queue.
COPY {table} (id, kind, queue, job_type, priority, attempts, deferrals, payload, headers,
              published_by, enqueued_at_ms)
FROM STDIN;

-- name: notify_queues
-- Wake the listeners of each queue named (after publish_copy, in its transaction).
SELECT pg_notify(%(channel)s, q) FROM unnest(%(queues)s::text[]) AS q;

-- name: publish_one
-- One envelope (the common enqueue): the same row and notification as publish, with plain
-- parameters instead of arrays, so the server plans no unnest, join or sort.
WITH inserted AS (
    INSERT INTO {table} (id, kind, queue, job_type, status, priority, attempts, deferrals,
                         payload, headers, published_by, enqueued_at_ms, available_at,
                         expires_at, processed_at)
    VALUES (%(id)s::uuid, %(kind)s, %(queue)s, %(job_type)s,
            CASE WHEN %(kind)s = 'topic' AND %(job_type)s = '' THEN 'done' ELSE 'pending' END,
            %(priority)s, %(attempt)s::int - 1, %(deferrals)s, %(payload)s::json,
            %(headers)s::json, %(published_by)s, %(enqueued_at_ms)s,
            now() + make_interval(secs => %(delay)s::float8),
            now() + make_interval(secs => %(delay)s::float8 + %(ttl)s::float8),
            CASE WHEN %(kind)s = 'topic' AND %(job_type)s = '' THEN now() END)
    RETURNING queue, status
)
SELECT pg_notify(%(channel)s, queue) FROM inserted WHERE status = 'pending';

-- name: publish_job
-- The most common enqueue: one first-attempt typed job, due now, no headers, no message TTL.
-- Every other column takes its default (pending, due now(), no expiry), so the statement carries
-- only what varies.
WITH inserted AS (
    INSERT INTO {table} (id, kind, queue, job_type, priority, payload, enqueued_at_ms)
    VALUES (%(id)s::uuid, 'job', %(queue)s, %(job_type)s, %(priority)s, %(payload)s::json,
            %(enqueued_at_ms)s)
    RETURNING queue
)
SELECT pg_notify(%(channel)s, queue) FROM inserted;

-- name: publish_unique
-- Insert envelopes of which some carry a unique key, in one statement with no read-then-write
-- race: a row whose key (with its period's bucket on this clock) is held by a row in a refused
-- state is not inserted, and the holder is returned instead. ON CONFLICT DO UPDATE (not DO
-- NOTHING) locks and returns the holder even when it was committed after this statement's
-- snapshot; with replace (bit 16) a pending holder takes the new payload, headers and due
-- time, anything else keeps its own. A running holder of a debounced job holds the key with
-- '#running' appended (see claim), so the key itself is free for one pending successor. One
-- result per input row, in input order: the id and the outcome (inserted, replaced or
-- skipped). Keys are distinct within one call (the caller folds duplicates).
WITH src AS (
    SELECT r.*, p.payload, h.headers,
           CASE WHEN r.key IS NULL OR r.period IS NULL THEN r.key
                ELSE r.key || '@' || floor(extract(epoch FROM now()) / r.period)::bigint::text
           END AS full_key
    FROM unnest(%(ids)s::uuid[], %(kinds)s::text[], %(queues)s::text[], %(job_types)s::text[],
                %(priorities)s::int[], %(attempts)s::int[], %(deferrals)s::int[],
                %(published_by)s::text[], %(enqueued_at_ms)s::bigint[], %(ttls)s::float8[],
                %(keys)s::text[], %(masks)s::int[], %(periods)s::float8[])
         WITH ORDINALITY
         AS r(id, kind, queue, job_type, priority, attempt, deferrals, published_by,
              enqueued_at_ms, ttl, key, mask, period, n)
    JOIN json_array_elements(%(payloads)s::json) WITH ORDINALITY AS p(payload, n) USING (n)
    JOIN json_array_elements(%(headers)s::json) WITH ORDINALITY AS h(headers, n) USING (n)
), written AS (
    INSERT INTO {table} AS m (id, kind, queue, job_type, status, priority, attempts, deferrals,
                              payload, headers, published_by, enqueued_at_ms, available_at,
                              expires_at, processed_at, unique_key, unique_kept,
                              unique_states)
    SELECT id, kind, queue, job_type,
           CASE WHEN kind = 'topic' AND job_type = '' THEN 'done' ELSE 'pending' END,
           priority, attempt - 1, deferrals, payload, headers, published_by, enqueued_at_ms,
           now() + make_interval(secs => %(delay)s::float8),
           now() + make_interval(secs => %(delay)s::float8 + ttl),
           CASE WHEN kind = 'topic' AND job_type = '' THEN now() END,
           full_key, full_key, coalesce(mask, 0)
    FROM src
    ORDER BY n
    ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL DO UPDATE
    SET payload = CASE WHEN m.status = 'pending' AND EXCLUDED.unique_states & 16 <> 0
                       THEN EXCLUDED.payload ELSE m.payload END,
        headers = CASE WHEN m.status = 'pending' AND EXCLUDED.unique_states & 16 <> 0
                       THEN EXCLUDED.headers ELSE m.headers END,
        available_at = CASE WHEN m.status = 'pending' AND EXCLUDED.unique_states & 16 <> 0
                            THEN EXCLUDED.available_at ELSE m.available_at END,
        expires_at = CASE WHEN m.status = 'pending' AND EXCLUDED.unique_states & 16 <> 0
                          THEN EXCLUDED.expires_at ELSE m.expires_at END
    RETURNING m.id, m.queue, m.status, m.unique_key
), woke AS (
    SELECT pg_notify(%(channel)s, q.queue)
    FROM (SELECT DISTINCT queue FROM written WHERE status = 'pending') AS q
)
SELECT coalesce(w.id, src.id)::text AS id,
       CASE WHEN w.id IS NULL OR w.id = src.id THEN 'inserted'
            WHEN w.status = 'pending' AND src.mask & 16 <> 0 THEN 'replaced'
            ELSE 'skipped' END AS outcome
FROM src LEFT JOIN written AS w ON w.unique_key = src.full_key
WHERE (SELECT count(*) FROM woke) >= 0
ORDER BY src.n;

-- name: publish_once
-- A topic publication under an idempotency key: the envelopes are inserted (as by publish)
-- only when the key is new or older than %(window)s seconds; either way the key's first
-- publication (its message ids, its fingerprint) comes back, with fresh = written now. The
-- key's row is locked by ON CONFLICT DO UPDATE, so a concurrent first use is waited for and
-- seen. A few forgotten keys are swept on the way.
WITH claimed AS (
    INSERT INTO {idempotency} AS i (key, fingerprint, ids)
    VALUES (%(key)s, %(fingerprint)s, %(ids)s::uuid[])
    ON CONFLICT (key) DO UPDATE
    SET fingerprint = CASE WHEN i.created_at <= now() - make_interval(secs => %(window)s::float8)
                           THEN EXCLUDED.fingerprint ELSE i.fingerprint END,
        ids = CASE WHEN i.created_at <= now() - make_interval(secs => %(window)s::float8)
                   THEN EXCLUDED.ids ELSE i.ids END,
        created_at = CASE WHEN i.created_at <= now() - make_interval(secs => %(window)s::float8)
                          THEN now() ELSE i.created_at END
    RETURNING i.ids::text[] AS ids, i.fingerprint, i.ids = %(ids)s::uuid[] AS fresh
), swept AS (
    DELETE FROM {idempotency}
    WHERE key IN (SELECT key FROM {idempotency}
                  WHERE created_at < now() - make_interval(secs => %(window)s::float8)
                    AND key <> %(key)s
                  LIMIT 10
                  FOR UPDATE SKIP LOCKED)
    RETURNING key
), inserted AS (
    {publish_rows}
    WHERE (SELECT fresh FROM claimed)
    ORDER BY n
    RETURNING queue, status
), woke AS (
    SELECT pg_notify(%(channel)s, q.queue)
    FROM (SELECT DISTINCT queue FROM inserted WHERE status = 'pending') AS q
)
SELECT ids, fingerprint, fresh FROM claimed
WHERE (SELECT count(*) FROM woke) >= 0 AND (SELECT count(*) FROM swept) >= 0;

-- part: paused_here
-- Whether the queue is paused: its limit zero, answered by the claim itself for every worker at
-- once (a row in {paused}, migration 0004, written by `queuey queues pause`, the dashboard or
-- Admin.pause_queue). A topic queue is paused with its app too (kind 'app', queue = the app's
-- prefix, %(app)s; NULL for a job queue). Two probes of its primary key, never a bitmap.
(EXISTS (SELECT 1 FROM {paused} WHERE kind = %(kind)s AND queue = %(queue)s)
 OR EXISTS (SELECT 1 FROM {paused} WHERE kind = 'app' AND queue = %(app)s))

-- part: set_here
-- Whether an operator set this queue's limits at run time ({flow_set}, migration 0018): they
-- replace the declared ones in claim_limited (lim), and the plain claim takes nothing for such a
-- queue but says so (overridden), so that the claim runs again limited. One primary-key probe.
EXISTS (SELECT 1 FROM {flow_set} WHERE kind = %(kind)s AND queue = %(queue)s)

-- part: claim_priorities
-- The priorities of a queue's pending rows, each with its first row in claim order (a loose
-- index scan over the claim index, one probe per priority): where claim reads the due rows of
-- each priority and limited_rows the newest due rows of each.
priorities (priority, available_at, seq) AS (
    (SELECT priority, available_at, seq FROM {table}
     WHERE status = 'pending' AND kind = %(kind)s AND queue = %(queue)s
     ORDER BY priority DESC, available_at, seq LIMIT 1)
    UNION ALL
    SELECT first.* FROM priorities AS p
    CROSS JOIN LATERAL (
        SELECT t.priority, t.available_at, t.seq FROM {table} AS t
        WHERE t.status = 'pending' AND t.kind = %(kind)s AND t.queue = %(queue)s
          AND t.priority < p.priority
        ORDER BY t.priority DESC, t.available_at, t.seq LIMIT 1
    ) AS first
)

-- part: claimable
-- Whether a due pending row may be claimed: not expired, of the job types asked for (NULL:
-- any), and not a debounced successor while its key is held as '#running' (claim explains the
-- probe).
(expires_at IS NULL OR expires_at > now())
AND (%(job_types)s::text[] IS NULL OR job_type = ANY(%(job_types)s::text[]))
AND (unique_states & 30 <> 18
     OR NOT EXISTS (SELECT 1 FROM {table} AS h  -- OFFSET 0: probed by key, never hashed
                    WHERE h.unique_key = {table}.unique_key || '#running' OFFSET 0))

-- part: due_rows
-- The due rows of one priority p (a row of claim_priorities) in claim order, locked, at most
-- %(limit)s: the index range of that priority's rows due now, from the first pending row the
-- loose scan found for it (claim explains why).
SELECT id, redeliveries, priority, available_at, seq FROM {table}
WHERE status = 'pending' AND kind = %(kind)s AND queue = %(queue)s
  AND priority = p.priority AND available_at <= now()
  AND (available_at, seq) >= (p.available_at, p.seq)
  AND {claimable}
ORDER BY available_at, seq
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- part: due_now
-- The due rows of every priority present (claim_priorities, due_rows), none while the queue is
-- paused or its limits are set at run time (then claim_limited claims it).
SELECT due_now.* FROM priorities AS p
CROSS JOIN LATERAL ({due_rows}) AS due_now
WHERE NOT {paused_here} AND NOT {set_here}

-- part: suspects
-- Each row's position in claim order (window w) and how many rows up to it lost a lease: a
-- suspect is claimed alone (claim explains why).
row_number() OVER w AS position,
count(*) FILTER (WHERE redeliveries > 0) OVER w AS suspects

-- part: claim_set
-- What a claim writes to each row it takes (the unique key released or held as '#running').
SET status = 'running', attempts = m.attempts + 1, claimed_at = now(),
    claimed_by = %(owner)s, lease_until = now() + make_interval(secs => %(lease)s::float8),
    unique_key = CASE WHEN m.unique_states & 2 = 0 THEN NULL
                      WHEN m.unique_states & 30 = 18 THEN m.unique_key || '#running'
                      ELSE m.unique_key END

-- part: claimed_columns
-- The first columns a claim returns, named for the row factory that decodes them (_rows.py).
m.id::text AS id, m.job_type, m.attempts, m.deferrals, m.priority,
m.payload::text AS payload, nullif(m.headers::text, '{{}}') AS headers, m.published_by, m.enqueued_at_ms

-- part: next_due
-- Seconds from now until the queue's next row scheduled for later falls due (NULL: none), one
-- probe per priority present (priorities: claim_priorities).
(SELECT extract(epoch FROM min(
     (SELECT t.available_at FROM {table} AS t
      WHERE t.status = 'pending' AND t.kind = %(kind)s AND t.queue = %(queue)s
        AND t.priority = p.priority AND t.available_at > now()
        AND (%(job_types)s::text[] IS NULL OR t.job_type = ANY(%(job_types)s::text[]))
      ORDER BY t.available_at LIMIT 1)) - now())::float8
 FROM priorities AS p)

-- part: claim_taken
-- The end claim and claim_aged share: the rows of ranked (position = claim order) taken, a
-- suspect only alone, and the next due time on a short claim (claim explains both).
claimed AS (
    UPDATE {table} AS m
    {claim_set}
    FROM ranked
    WHERE m.id = ranked.id AND (ranked.position = 1 OR ranked.suspects = 0)
    RETURNING {claimed_columns},
              ranked.position, m.redeliveries,
              greatest(extract(epoch FROM now() - m.available_at), 0)::float8 AS waited
), due AS (
    SELECT CASE WHEN (SELECT count(*) FROM claimed) < %(limit)s
                 AND NOT {paused_here}
           THEN {next_due}
           END AS due_in,
           set_config('synchronous_commit', 'off', true) AS relaxed
)
SELECT claimed.*, due.due_in, NULL::bigint AS held_concurrency, NULL::bigint AS held_rate,
       {set_here} AS overridden
FROM due LEFT JOIN claimed ON true;

-- name: claim
-- Take up to %(limit)s due rows of one queue, skipping rows other workers hold. A row that
-- already lost a lease (redeliveries > 0) may be killing its workers: it is claimed alone, and
-- a clean batch stops before it, so a poisoned job cannot drag innocent rows into its crashes.
-- A unique job whose refused states leave out running releases its key here (a plain row's is
-- NULL already). A debounced job (replace, bit 16, refusing pending and running only: bits
-- 30 = 18) holds its key as '#running' while it runs, so one pending successor can take the
-- key meanwhile; that successor is not claimed while the '#running' key is held (the newest
-- update runs after the run in progress, never beside it); that probe is a correlated lookup
-- by key (OFFSET 0 keeps it from being hashed over the whole table). Rows come back with their
-- position in claim order (UPDATE … RETURNING has no order of its own), the payload as JSON
-- text (decoded by the row factory's faster parser) and with empty headers as NULL (nothing to
-- decode); waited is how long the row was due before this claim (seconds: the scheduling lag
-- the metrics report). Columns are named for the row factory that decodes them (_rows.py),
-- which finds each by name. A paused queue (paused_here: the limit zero) yields nothing, for
-- every worker at once.
--
-- A short claim (fewer rows than the limit) also says when the queue's next row falls due, so
-- a wake-up costs one round trip: due_in, seconds from now, on every row (NULL on a full claim,
-- when no row is scheduled for later, or while the queue is paused). The statement then returns
-- one row whose id is NULL when it claimed nothing. The rows this claim takes are still pending
-- in its snapshot (due now), hence only rows due later count. The next due time is found per
-- priority present (a loose index scan over the claim index: one probe per priority), so its
-- cost does not grow with the rows waiting.
--
-- The due rows are read the same way: for each priority present, highest first (the order the
-- loose scan finds them in), the index range of that priority's rows due now, in due order.
-- Each range ends at the first row due later, so rows scheduled for later are never walked
-- (one scan of the whole queue in claim order steps over every one of them on a short claim;
-- beside 100,000 delayed rows the planner read the whole table instead, ~1,900 pages per
-- wake-up). The outer LIMIT stops pulling, and so locking, once it has %(limit)s rows.
-- Each range starts at the first pending row the loose scan found for its priority (the same
-- snapshot: no visible pending row lies before it). Rows claimed since the last vacuum leave
-- dead entries at the front of their priority's range; the loose scan steps over them once and
-- the range does not walk them again (after a drain of 90,000 rows: ~660 index pages per short
-- claim instead of ~1,330).
--
-- The claim's commit does not wait for its write-ahead log to reach the disk (due sets
-- synchronous_commit off for this transaction only; PostgreSQL reads the setting when the
-- transaction commits): a claim lost in a database crash leaves its rows pending, to be claimed
-- again (at-least-once), and any later durable commit, such as this worker's ack, flushes the log
-- past it. This saves the wake-up path one disk flush (docs/benchmarks.md, round 4). Enqueues,
-- acks and every other settle stay durable commits.
WITH RECURSIVE {claim_priorities}, picked AS (
    {due_now}
    LIMIT %(limit)s
), ranked AS (
    SELECT id,
           {suspects}
    FROM picked
    WINDOW w AS (ORDER BY priority DESC, available_at, seq)
), {claim_taken}

-- name: claim_aged
-- The claim of a queue with priority aging (Queue(priority_aging=...)) and no flow limits: as
-- claim, but a due row's rank is its priority plus one per %(aging)s seconds it has been due,
-- at most %(top)s (the queue's max_priority), and rows are taken by rank, then due time, then
-- insertion. Within one priority the oldest row ranks highest, so the first %(limit)s due rows
-- of each priority present (the same index ranges as claim's, each locked) hold the
-- %(limit)s best ranked; those not taken are unlocked when the statement commits.
WITH RECURSIVE {claim_priorities}, picked AS (
    {due_now}
), aged AS (
    SELECT c.*,
           least(c.priority + floor(greatest(extract(epoch FROM now() - c.available_at), 0)
                                    / %(aging)s::float8), %(top)s::int)::int AS rank
    FROM picked AS c
    ORDER BY rank DESC, c.available_at, c.seq
    LIMIT %(limit)s
), ranked AS (
    SELECT id,
           {suspects}
    FROM aged
    WINDOW w AS (ORDER BY rank DESC, available_at, seq)
), {claim_taken}

-- name: claim_lock
-- The first statement of a limited claim's transaction (claim_limited is the second): claims of
-- one limited queue take turns, across every process, so each one counts what the claims before
-- it started (its own snapshot is taken after this lock is granted).
SELECT pg_advisory_xact_lock(hashtextextended(%(kind)s || ':' || %(queue)s, 29));

-- part: limited_rows
-- The CTEs claim_limited and flow_held share (a part is never run alone, and follows
-- claim_priorities): the limits (lim), the rows considered (cand: the oldest %(scan)s due rows
-- in claim order and the newest %(tail)s due rows of each priority, so that rows enqueued
-- behind a long backlog of full keys are seen at once), each one's key under each limit
-- (keyed; the text json_agg makes, built directly for one field), what each key holds (running,
-- room; with %(room_only)s a cap that the queue's running rows and every row considered could
-- not reach together is not counted per key: its room is the cap, and each of its keys admits
-- all its rows, as the count would have let it), the rows each keyed limit admits (ranked,
-- verdict, keyed_ok) and each whole limit's turn (whole); held counts the rows a limit of each kind holds back. A rate limit's
-- room for a key is how many starts its pace allows now: with tat the later of the key's
-- recorded next start ({flow_pace}) and now, floor((now + tau - tat) / spacing) + 1 (at most
-- burst + 1; none while tat is more than tau = burst spacings ahead).
lim AS MATERIALIZED (
    SELECT l.n, l.job_type, l.fields, l.cap, l.per, l.bucket, l.spacing, l.tau
    FROM json_to_recordset(coalesce(
             (SELECT f.limits FROM {flow_set} AS f WHERE f.kind = %(kind)s AND f.queue = %(queue)s),
             %(limits)s::json))
         AS l(n int, job_type text, fields json, cap int, per float8, bucket text,
              spacing float8, tau float8)
), clock AS MATERIALIZED (
    SELECT clock_timestamp() AS t, extract(epoch FROM clock_timestamp())::float8 AS s
), cand AS MATERIALIZED (
    SELECT DISTINCT ON (d.id) d.* FROM (
        (SELECT id, job_type, payload, redeliveries, priority, available_at, seq FROM {table}
        WHERE status = 'pending' AND kind = %(kind)s AND queue = %(queue)s
          AND available_at <= now() AND {claimable}
          AND NOT {paused_here}
        ORDER BY priority DESC, available_at, seq
        LIMIT %(scan)s)
        UNION ALL
        SELECT newest.* FROM priorities AS p CROSS JOIN LATERAL (
            SELECT id, job_type, payload, redeliveries, priority, available_at, seq FROM {table}
            WHERE status = 'pending' AND kind = %(kind)s AND queue = %(queue)s
              AND priority = p.priority
              AND available_at <= now() AND {claimable}
              AND NOT {paused_here}
            ORDER BY available_at DESC, seq DESC
            LIMIT %(tail)s
        ) AS newest
    ) AS d
    ORDER BY d.id
), keyed AS MATERIALIZED (
    SELECT c.id, c.priority, c.available_at, c.seq, l.n, l.cap, l.per, l.bucket,
           json_array_length(l.fields) > 0 AS by_key,
           CASE json_array_length(l.fields)
               WHEN 1 THEN '[' || coalesce((c.payload -> (l.fields ->> 0))::text, 'null') || ']'
               ELSE (SELECT coalesce(json_agg(c.payload -> f.name ORDER BY f.i), '[]')::text
                     FROM json_array_elements_text(l.fields) WITH ORDINALITY AS f(name, i))
           END AS key
    FROM cand AS c JOIN lim AS l ON l.job_type IS NULL OR l.job_type = c.job_type
), running AS (
    SELECT l.n,
           CASE json_array_length(l.fields)
               WHEN 1 THEN '[' || coalesce((r.payload -> (l.fields ->> 0))::text, 'null') || ']'
               ELSE (SELECT coalesce(json_agg(r.payload -> f.name ORDER BY f.i), '[]')::text
                     FROM json_array_elements_text(l.fields) WITH ORDINALITY AS f(name, i))
           END AS key,
           count(*) AS held
    FROM {table} AS r
    JOIN (SELECT * FROM lim AS c
          WHERE c.per IS NULL
            AND NOT (%(room_only)s AND c.cap >= (SELECT count(*) FROM cand)
                     + (SELECT count(*) FROM {table} AS a
                        WHERE a.status = 'running' AND a.kind = %(kind)s AND a.queue = %(queue)s))
         ) AS l ON l.job_type IS NULL OR l.job_type = r.job_type
    WHERE r.status = 'running' AND r.kind = %(kind)s AND r.queue = %(queue)s
    GROUP BY 1, 2
), room AS MATERIALIZED (
    SELECT k.n, k.key, k.per, k.bucket, k.spacing, k.tau, k.waiting, p.tat,
           CASE WHEN k.per IS NULL THEN k.cap - coalesce(run.held, 0)
                ELSE greatest(floor((c.s + k.tau - p.tat) / k.spacing + 1e-9)::int + 1, 0)
           END AS room
    FROM (SELECT w.n, w.key, w.cap, w.per, w.bucket, l.spacing, l.tau, count(*) AS waiting
          FROM keyed AS w JOIN lim AS l ON l.n = w.n
          GROUP BY w.n, w.key, w.cap, w.per, w.bucket, l.spacing, l.tau) AS k
    CROSS JOIN clock AS c
    LEFT JOIN running AS run ON k.per IS NULL AND run.n = k.n AND run.key = k.key
    LEFT JOIN LATERAL (
        SELECT greatest((SELECT f.tat FROM {flow_pace} AS f  -- one row: its primary key
                         WHERE f.kind = %(kind)s AND f.queue = %(queue)s
                           AND f.bucket = k.bucket AND f.key = k.key), c.s) AS tat
    ) AS p ON k.per IS NOT NULL
), ranked AS MATERIALIZED (
    SELECT k.id, k.n, k.by_key, r.room, k.per,
           row_number() OVER (PARTITION BY k.n, k.key
                              ORDER BY k.priority DESC, k.available_at, k.seq) AS turn
    FROM keyed AS k JOIN room AS r ON r.n = k.n AND r.key = k.key
), verdict AS (
    SELECT x.id, max(x.turn) FILTER (WHERE x.by_key) AS turn,
           bool_or(x.by_key AND x.turn > x.room) AS blocked
    FROM ranked AS x GROUP BY x.id
), keyed_ok AS MATERIALIZED (
    SELECT c.*, coalesce(v.turn, 1) AS turn
    FROM cand AS c LEFT JOIN verdict AS v ON v.id = c.id
    WHERE NOT coalesce(v.blocked, false)
), whole AS (
    SELECT x.id, x.n, x.room, x.per,
           row_number() OVER (PARTITION BY x.n ORDER BY c.priority DESC, c.available_at, c.seq)
               AS turn
    FROM ranked AS x JOIN keyed_ok AS c ON c.id = x.id
    WHERE NOT x.by_key
), held AS (
    SELECT count(DISTINCT h.id) FILTER (WHERE h.per IS NULL) AS held_concurrency,
           count(DISTINCT h.id) FILTER (WHERE h.per IS NOT NULL) AS held_rate
    FROM (SELECT x.id, x.per FROM ranked AS x WHERE x.by_key AND x.turn > x.room
          UNION ALL
          SELECT w.id, w.per FROM whole AS w WHERE w.turn > w.room) AS h
)

-- name: claim_limited
-- The claim of a queue with flow limits (queuey.limits), run after claim_lock in one
-- transaction. %(limits)s is a JSON array of objects: n, job_type (NULL: every row), fields,
-- cap, per (seconds; NULL: a concurrency cap), bucket, spacing (per / cap) and tau (burst *
-- spacing). A row's key under a limit is its by fields' values read from its payload, as a
-- JSON array. A key's room is its cap less the rows of the key running now (a concurrency cap:
-- a lost lease holds its share until reclaim puts the row back to pending) or the starts its
-- pace allows now (a rate limit, limited_rows). Among the oldest %(scan)s due rows in claim
-- order, each key under each keyed limit (one with by fields) admits its first `room` rows;
-- then each limit of a whole queue or job type admits its first `room` of those; the rows
-- admitted are taken round robin across keys (the first row of every key, then the second...),
-- in claim order within a turn. Rows skipped are not touched: no attempt, no deferral. Each
-- key's pace moves one spacing per start it made, in this statement (paced), unless its new
-- pace has already passed when the statement writes it (ahead: the next claim of the queue,
-- which follows this transaction's commit under claim_lock, reads a later clock, so such a
-- pace would say nothing); the paces of keys it did not move whose time has passed are deleted
-- (they say nothing). Limits an operator set
-- at run time ({flow_set}) replace %(limits)s (overridden says so).
--
-- due_in (on a short claim): seconds until the next row may start: the next row scheduled for
-- later; for a key with more rows waiting than room, when its pace allows the next start, or
-- %(recheck)s under a concurrency cap (a completion in another process sends no
-- notification); whichever is first.
-- held_concurrency, held_rate (on every row): how many of the due rows considered a limit of
-- that kind held back (a row held by both kinds counts in both), for the throttle metrics.
-- Otherwise as claim (suspects claimed alone, unique keys, a paused queue yields nothing).
WITH RECURSIVE {claim_priorities}, {limited_rows}, picked AS (
    SELECT c.id, c.redeliveries, c.priority, c.available_at, c.seq, c.turn
    FROM keyed_ok AS c
    LEFT JOIN (SELECT DISTINCT w.id FROM whole AS w WHERE w.turn > w.room) AS over
           ON over.id = c.id
    WHERE over.id IS NULL
    ORDER BY c.turn, c.priority DESC, c.available_at, c.seq
    LIMIT %(limit)s
), ordered AS (
    SELECT id,
           {suspects}
    FROM picked
    WINDOW w AS (ORDER BY turn, priority DESC, available_at, seq)
), claimed AS (
    UPDATE {table} AS m
    {claim_set}
    FROM ordered
    WHERE m.id = ordered.id AND m.status = 'pending'
      AND (ordered.position = 1 OR ordered.suspects = 0)
    RETURNING {claimed_columns},
              ordered.position, m.redeliveries,
              greatest(extract(epoch FROM now() - m.available_at), 0)::float8 AS waited
), taken AS (
    SELECT r.bucket, r.key, r.tat + count(*) * r.spacing AS tat
    FROM keyed AS k JOIN claimed AS c ON c.id = k.id::text
    JOIN room AS r ON r.n = k.n AND r.key = k.key
    WHERE k.per IS NOT NULL
    GROUP BY r.n, r.bucket, r.key, r.tat, r.spacing
), ahead AS MATERIALIZED (
    SELECT DISTINCT ON (t.bucket, t.key) t.bucket, t.key, t.tat FROM taken AS t
    WHERE t.tat > extract(epoch FROM clock_timestamp())
    ORDER BY t.bucket, t.key, t.tat DESC
), paced AS (
    INSERT INTO {flow_pace} AS f (kind, queue, bucket, key, tat)
    SELECT %(kind)s, %(queue)s, bucket, key, tat FROM ahead
    ON CONFLICT (kind, queue, bucket, key) DO UPDATE SET tat = EXCLUDED.tat
), pruned AS (
    DELETE FROM {flow_pace} AS f
    WHERE f.kind = %(kind)s AND f.queue = %(queue)s AND f.tat < (SELECT s FROM clock)
      AND NOT EXISTS (SELECT 1 FROM ahead AS x WHERE x.bucket = f.bucket AND x.key = f.key)
), due AS (
    SELECT CASE WHEN (SELECT count(*) FROM claimed) < %(limit)s
                 AND NOT {paused_here}
           THEN least(
               {next_due},
               (SELECT min(r.tat + greatest(r.room, 0) * r.spacing - r.tau) - min(c.s)
                FROM room AS r CROSS JOIN clock AS c
                WHERE r.per IS NOT NULL AND r.waiting > r.room),
               (SELECT %(recheck)s::float8 FROM room AS r
                WHERE r.per IS NULL AND r.waiting > r.room LIMIT 1))
           END AS due_in,
           set_config('synchronous_commit', 'off', true) AS relaxed
)
SELECT claimed.*, due.due_in, held.held_concurrency, held.held_rate, {set_here} AS overridden
FROM due CROSS JOIN held LEFT JOIN claimed ON true;

-- name: flow_held
-- Read-only (queuey status): how many due rows of a queue with flow limits the limits hold back
-- now, per kind, counted as claim_limited counts them (among the oldest %(scan)s due rows).
WITH RECURSIVE {claim_priorities}, {limited_rows}
SELECT held_concurrency, held_rate FROM held;

-- name: flow_keys
-- Read-only (the dashboard's Flow limits page): what a queue's limits hold back now, per limit
-- (n, as in %(limits)s, or as set at run time) and key, among the oldest %(scan)s due rows, as
-- claim_limited counts them: the due rows waiting, the rows running (a concurrency cap) against
-- its cap, the starts it may make now (room), the rows it holds back, and, for a rate limit with
-- no room, the seconds until its pace allows the next start. Keys holding rows back first, at
-- most 200.
WITH RECURSIVE {claim_priorities}, {limited_rows}
SELECT r.n, r.key, r.per IS NULL AS capped, l.cap, r.waiting::int AS waiting,
       CASE WHEN r.per IS NULL THEN l.cap - r.room END::int AS running,
       greatest(r.room, 0)::int AS room,
       (coalesce((SELECT count(*) FROM ranked AS x
                  WHERE x.n = r.n AND x.by_key AND x.turn > x.room
                    AND x.id IN (SELECT k.id FROM keyed AS k WHERE k.n = r.n AND k.key = r.key)),
                 0)
        + coalesce((SELECT count(*) FROM whole AS w WHERE w.n = r.n AND w.turn > w.room), 0)
       )::int AS held,
       CASE WHEN r.per IS NOT NULL AND r.room <= 0
            THEN greatest(r.tat - r.tau - (SELECT s FROM clock), 0) END AS next_in
FROM room AS r JOIN lim AS l ON l.n = r.n
ORDER BY held DESC, r.n, r.waiting DESC, r.key
LIMIT 200;

-- name: declare_limits
-- Record the flow limits a worker declares (%(rows)s: a JSON array of kind, queue, limits,
-- shown), for the dashboard; the latest declaration of a queue wins.
INSERT INTO {flow_declared} AS d (kind, queue, limits, shown)
SELECT r.kind, r.queue, r.limits, r.shown
FROM json_to_recordset(%(rows)s::json) AS r(kind text, queue text, limits json, shown text)
ON CONFLICT (kind, queue) DO UPDATE
SET limits = excluded.limits, shown = excluded.shown, declared_at = now();

-- name: release
-- Hand a claimed row back untouched by a failure (graceful shutdown cancelled it): pending now,
-- the run it started not counted; a row whose cancel was asked for ends cancelled instead.
-- Back to pending, a unique job takes its key back, or ends superseded (as reschedule says).
-- Returns the row's status and the superseding job's id.
WITH rival AS (
    SELECT h.id FROM {table} AS m JOIN {table} AS h ON h.unique_key = m.unique_kept
    WHERE m.id = %(id)s AND h.id <> m.id AND m.cancel_requested_at IS NULL
)
UPDATE {table}
SET status = CASE WHEN cancel_requested_at IS NOT NULL OR EXISTS (SELECT 1 FROM rival)
                  THEN 'cancelled' ELSE 'pending' END,
    attempts = CASE WHEN cancel_requested_at IS NULL THEN attempts - 1 ELSE attempts END,
    processed_at = CASE WHEN cancel_requested_at IS NOT NULL OR EXISTS (SELECT 1 FROM rival)
                        THEN now() END,
    error = CASE WHEN cancel_requested_at IS NOT NULL THEN 'cancelled'
                 WHEN EXISTS (SELECT 1 FROM rival)
                 THEN 'superseded: job ' || (SELECT id FROM rival)::text || ' holds its unique '
                      || 'key (enqueued while this one ran); running this one again would run '
                      || 'the key twice'
                 ELSE error END,
    unique_key = CASE WHEN cancel_requested_at IS NOT NULL OR EXISTS (SELECT 1 FROM rival)
                      THEN NULL ELSE unique_kept END,
    claimed_by = NULL, lease_until = NULL, cancel_requested_at = NULL
WHERE id = %(id)s AND status = 'running' AND claimed_by = %(owner)s AND attempts = %(attempts)s
RETURNING status, (SELECT id::text FROM rival) AS rival;

-- name: ack
-- Successes, many at once, each fenced: a row is done only while this owner still holds the
-- attempt it ran and no cancel was asked for (then it ends cancelled); a unique key is released
-- unless done is a refused state. A debounced job (bits 30 = 18) that ends wakes its queue on
-- %(channel)s: its successor may run now. Returns the ids NOT recorded (their claim was lost),
-- usually none.
WITH acked AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(attempts)s::int[]) AS a(id, attempts)
), done AS (
    UPDATE {table} AS m
    SET status = 'done', processed_at = now(), claimed_by = NULL, lease_until = NULL,
        unique_key = CASE WHEN m.unique_states & 4 = 0 THEN NULL ELSE m.unique_key END
    FROM acked
    WHERE m.id = acked.id AND m.status = 'running' AND m.claimed_by = %(owner)s
      AND m.attempts = acked.attempts AND m.cancel_requested_at IS NULL
    RETURNING m.id, m.queue, m.unique_states, m.batch
), woke AS (
    SELECT pg_notify(%(channel)s, q.queue)
    FROM (SELECT DISTINCT queue FROM done WHERE unique_states & 30 = 18) AS q
), batch_ended AS (
    SELECT batch, true AS ok FROM done
), {batch_release}, {batch_wake}
SELECT acked.id::text AS id FROM acked
WHERE acked.id NOT IN (SELECT id FROM done) AND (SELECT count(*) FROM woke) >= 0
  AND (SELECT count(*) FROM batch_woke) >= 0;

-- name: settle_batch
-- A batch handler's outcomes, every row in one statement, each fenced as ack is (this owner,
-- the attempt it ran, no cancel asked for): verdict 'done' (as ack), 'pending' (a retry or a
-- deferral, as reschedule: attempts, deferrals, priority, due after delay seconds, the failed
-- attempt's error joining errors) or 'failed' (a dead letter, as dead_letter). A retry or
-- deferral of a unique job (unique_kept: its key may have been taken meanwhile) and a dead
-- letter of a workflow step (its downstream steps end with it) are left to reschedule and
-- dead_letter: such a row is not touched here. A member of a batch of jobs (migration 0017)
-- that ends here is counted in its batch, as by ack and dead_letter. Returns the ids recorded;
-- the caller settles every other row one by one (which also tells a lost claim from a cancel).
WITH given AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(attempts)s::int[], %(verdicts)s::text[],
                         %(next_attempts)s::int[], %(deferrals)s::int[], %(priorities)s::int[],
                         %(delays)s::float8[], %(errors)s::text[], %(failures)s::text[])
        AS g(id, attempts, verdict, next_attempts, deferrals, priority, delay, error, failure)
), settled AS (
    UPDATE {table} AS m
    SET status = g.verdict,
        processed_at = CASE WHEN g.verdict = 'pending' THEN NULL ELSE now() END,
        claimed_by = NULL, lease_until = NULL,
        attempts = CASE WHEN g.verdict = 'pending' THEN g.next_attempts ELSE m.attempts END,
        deferrals = CASE WHEN g.verdict = 'pending' THEN g.deferrals ELSE m.deferrals END,
        priority = CASE WHEN g.verdict = 'pending' THEN g.priority ELSE m.priority END,
        available_at = CASE WHEN g.verdict = 'pending'
                            THEN now() + make_interval(secs => g.delay) ELSE m.available_at END,
        expires_at = CASE WHEN g.verdict = 'pending'
                          THEN now() + make_interval(secs => g.delay + %(ttl)s::float8)
                          ELSE m.expires_at END,
        error = CASE WHEN g.verdict = 'done' THEN m.error ELSE coalesce(g.error, m.error) END,
        errors = CASE WHEN g.failure IS NULL THEN m.errors ELSE jsonb_path_query_array(
            coalesce(m.errors, '[]'::jsonb) || jsonb_build_array(g.failure::jsonb || jsonb_build_object(
                'at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
                'worker', %(owner)s::text)),
            '$[last - $keep + 1 to last]', jsonb_build_object('keep', %(keep_errors)s::int)) END,
        unique_key = CASE WHEN g.verdict = 'pending' THEN m.unique_kept
                          WHEN g.verdict = 'done' AND m.unique_states & 4 <> 0 THEN m.unique_key
                          WHEN g.verdict = 'failed' AND m.unique_states & 8 <> 0 THEN m.unique_key
                     END
    FROM given AS g
    WHERE m.id = g.id AND m.status = 'running' AND m.claimed_by = %(owner)s
      AND m.attempts = g.attempts AND m.cancel_requested_at IS NULL
      AND (g.verdict = 'done' OR (g.verdict = 'pending' AND m.unique_kept IS NULL)
           OR (g.verdict = 'failed' AND m.workflow IS NULL))
    RETURNING m.id, m.queue, m.status, m.unique_states, m.batch
), woke AS (
    SELECT pg_notify(%(channel)s, q.queue)
    FROM (SELECT DISTINCT queue FROM settled
          WHERE status <> 'pending' AND unique_states & 30 = 18) AS q
), batch_ended AS (
    SELECT batch, status = 'done' AS ok FROM settled WHERE status <> 'pending'
), {batch_release}, {batch_wake}
SELECT id::text FROM settled
WHERE (SELECT count(*) FROM woke) >= 0 AND (SELECT count(*) FROM batch_woke) >= 0;

-- part: fed_counts
-- A waiting workflow step fed by parents completed now (fed: child, n parents, inputs by
-- position): its parents left and inputs updated, released (pending, due now) at zero.
parents_left = c.parents_left - fed.n,
inputs = coalesce(c.inputs, '{{}}'::jsonb) || fed.inputs,
status = CASE WHEN c.parents_left - fed.n <= 0 THEN 'pending' ELSE 'waiting' END,
available_at = now()

-- part: step_payload
-- A released step's payload: its step with the inputs in position order (migration 0014).
payload = CASE WHEN c.parents_left - fed.n > 0 THEN c.payload ELSE json_build_object(
    '__queuey_step__', c.step || jsonb_build_object('inputs', (
        SELECT jsonb_agg(x.value ORDER BY x.key::int)
        FROM jsonb_each(coalesce(c.inputs, '{{}}'::jsonb) || fed.inputs) AS x))) END

-- part: released_steps
-- The body of a released CTE: the waiting steps fed (fed_counts, step_payload), returning each
-- one's queue and status.
UPDATE {table} AS c
SET {fed_counts},
    {step_payload}
FROM fed
WHERE c.id = fed.child AND c.status = 'waiting'
RETURNING c.queue, c.status

-- part: ack_results_done
-- The fenced successes of ack_results and ack_fan_out (acked, done, woke): each row's result
-- written and announced; fan: a fan-out result's list of jobs (queuey.fan_out), else NULL.
-- The announcement on %(results_channel)s (delivered at commit) is the id, then a space and the
-- result as written when it is at most 7,000 bytes and the row holds no earlier error (what
-- job_ends would read: the awaiter needs no read back), else the id alone. Only this fenced
-- update sends a result this way: a worker that lost its claim updates no row here.
acked AS (
    SELECT * FROM unnest(%(ids)s::uuid[], %(attempts)s::int[], %(results)s::text[])
        AS a(id, attempts, result)
), done AS (
    UPDATE {table} AS m
    SET status = 'done', processed_at = now(), claimed_by = NULL, lease_until = NULL,
        result = acked.result::json,
        unique_key = CASE WHEN m.unique_states & 4 = 0 THEN NULL ELSE m.unique_key END
    FROM acked
    WHERE m.id = acked.id AND m.status = 'running' AND m.claimed_by = %(owner)s
      AND m.attempts = acked.attempts AND m.cancel_requested_at IS NULL
    RETURNING m.id, m.queue, m.unique_states, m.result::jsonb AS result, m.batch, m.workflow,
              CASE WHEN jsonb_typeof(m.result::jsonb -> '__queuey_fan_out__') = 'array'
                   THEN m.result::jsonb -> '__queuey_fan_out__' END AS fan,
              m.headers, pg_notify(%(results_channel)s, m.id::text || CASE
                  WHEN m.error IS NULL AND octet_length(acked.result) <= 7000
                  THEN ' ' || acked.result ELSE '' END) AS told
), woke AS (
    SELECT pg_notify(%(channel)s, q.queue)
    FROM (SELECT DISTINCT queue FROM done WHERE unique_states & 30 = 18) AS q
)

-- name: ack_results
-- Successes of jobs that declare a result type: fenced exactly as ack (no cancel asked for),
-- each row's result (JSON text; NULL for none) written in the same statement, so a worker that
-- lost its claim writes no result and the winner's stands. Each row recorded is announced on
-- %(results_channel)s (with its result when small: ack_results_done), waking the callers
-- awaiting it (and a debounced job's queue on %(channel)s, as ack says). Returns the ids NOT
-- recorded.
WITH {ack_results_done}, fed AS (
    -- Workflow steps (migration 0014): each child of a row completed here gets the row's
    -- result at its position and one parent less, in this statement; at zero it is released.
    SELECT e.child, count(*)::int AS n,
           jsonb_object_agg(e.position::text, coalesce(done.result, 'null'::jsonb)) AS inputs
    FROM done JOIN {workflow_edges} AS e ON e.parent = done.id
    GROUP BY e.child
), unlinked AS (
    DELETE FROM {workflow_edges} AS e USING done WHERE e.parent = done.id
), released AS (
    {released_steps}
), batch_ended AS (
    SELECT batch, true AS ok FROM done
), {batch_release}, ready AS (
    SELECT pg_notify(%(channel)s, q.queue)
    FROM (SELECT queue FROM released WHERE status = 'pending'
          UNION SELECT queue FROM batch_called WHERE status = 'pending') AS q
)
SELECT acked.id::text AS id FROM acked
WHERE acked.id NOT IN (SELECT id FROM done) AND (SELECT count(*) FROM woke) >= 0
  AND (SELECT count(*) FROM ready) >= 0;

-- name: ack_fan_out
-- ack_results for a batch of successes of which some fanned out (queuey.fan_out): as
-- ack_results, and each fan-out result adds its jobs to its row's workflow in this statement.
-- A statement of its own, run only for such batches, so that ack_results stays under the
-- 4,096 bytes whose parsing psycopg caches.
WITH {ack_results_done}, fanned AS (
    -- Dynamic fan-out (queuey.fan_out): a result whose key __queuey_fan_out__ lists jobs (id,
    -- job_type, queue, payload) adds those jobs to the row's workflow, due now, in this
    -- statement; each step after the row waits for them instead (their results at positions
    -- 0.., in order). They carry the row's headers (its workflow's id and trace context) and
    -- its id (queuey-added-by: their parent in the workflow's graph).
    SELECT done.id AS parent, done.workflow, done.headers, f.n - 1 AS position, f.step
    FROM done, jsonb_array_elements(done.fan) WITH ORDINALITY AS f(step, n)
), spawned AS (
    INSERT INTO {table} (id, kind, queue, job_type, status, payload, enqueued_at_ms, workflow,
                         headers)
    SELECT r.id, 'job', r.queue, r.job_type, 'pending', r.payload, r.at, f.workflow,
           (coalesce(f.headers::jsonb, '{{}}'::jsonb)
            || jsonb_build_object('queuey-added-by', f.parent::text))::json
    FROM fanned AS f,
         jsonb_to_record(f.step) AS r(id uuid, queue text, job_type text, payload json, at bigint)
    ORDER BY f.parent, f.position
    RETURNING queue
), rewired AS (
    INSERT INTO {workflow_edges} (parent, child, position, policy)
    SELECT (f.step ->> 'id')::uuid, e.child, f.position, e.policy
    FROM fanned AS f JOIN {workflow_edges} AS e ON e.parent = f.parent
), fed AS (
    -- Workflow steps (migration 0014): each child of a row completed here gets the row's
    -- result at its position and one parent less, in this statement; at zero it is released.
    -- A row that fanned out to k jobs gives no result: its child waits for k - 1 more.
    SELECT e.child, sum(1 - coalesce(jsonb_array_length(done.fan), 0))::int AS n,
           coalesce(jsonb_object_agg(e.position::text, coalesce(done.result, 'null'::jsonb))
                    FILTER (WHERE done.fan IS NULL), '{{}}'::jsonb) AS inputs,
           jsonb_path_query_array(jsonb_agg(done.fan) FILTER (WHERE done.fan IS NOT NULL),
                                  '$[*][*].id') AS spawned
    FROM done JOIN {workflow_edges} AS e ON e.parent = done.id
    GROUP BY e.child
), unlinked AS (
    DELETE FROM {workflow_edges} AS e USING done WHERE e.parent = done.id
), released AS (
    UPDATE {table} AS c
    SET {fed_counts},
        step = CASE WHEN fed.spawned IS NULL THEN c.step
                    ELSE c.step || jsonb_build_object('parents', fed.spawned) END,
        {step_payload}
    FROM fed
    WHERE c.id = fed.child AND c.status = 'waiting'
    RETURNING c.queue, c.status
), batch_ended AS (
    SELECT batch, true AS ok FROM done
), {batch_release}, ready AS (
    SELECT pg_notify(%(channel)s, q.queue)
    FROM (SELECT queue FROM released WHERE status = 'pending' UNION SELECT queue FROM spawned
          UNION SELECT queue FROM batch_called WHERE status = 'pending') AS q
)
SELECT acked.id::text AS id FROM acked
WHERE acked.id NOT IN (SELECT id FROM done) AND (SELECT count(*) FROM woke) >= 0
  AND (SELECT count(*) FROM ready) >= 0;

-- name: job_ends
-- How each of the jobs %(ids)s stands, for the callers awaiting their results: its status,
-- last error and result (as JSON text). A job that is not found has no row here.
SELECT id::text AS id, status, error, result::text AS result
FROM {table}
WHERE id = ANY(%(ids)s::uuid[]);

-- name: reschedule
-- Retry or deferral, fenced (as ack: a cancel asked for refuses it): back to pending after
-- %(delay)s seconds. A retry's failed attempt (%(failure)s, JSON: attempt, type, message,
-- traceback) joins the row's errors, stamped with the database's time and this worker, and
-- only the latest %(keep_errors)s are kept (migration 0012); in the same statement, so
-- recording it costs no round trip. A unique job takes its key back (unique_kept). When
-- another job holds it by now (a newer duplicate, enqueued while this one ran and its states
-- let the key go), the newer job stands for the key: this one ends cancelled, its error saying
-- which job superseded it. Returns the row's status and the superseding job's id.
WITH rival AS (
    SELECT h.id FROM {table} AS m JOIN {table} AS h ON h.unique_key = m.unique_kept
    WHERE m.id = %(id)s AND h.id <> m.id
)
UPDATE {table}
SET status = CASE WHEN EXISTS (SELECT 1 FROM rival) THEN 'cancelled' ELSE 'pending' END,
    attempts = %(next_attempts)s, deferrals = %(deferrals)s,
    priority = %(priority)s, available_at = now() + make_interval(secs => %(delay)s::float8),
    expires_at = now() + make_interval(secs => %(delay)s::float8 + %(ttl)s::float8),
    processed_at = CASE WHEN EXISTS (SELECT 1 FROM rival) THEN now() END,
    error = CASE WHEN EXISTS (SELECT 1 FROM rival)
                 THEN 'superseded: job ' || (SELECT id FROM rival)::text || ' holds its unique '
                      || 'key (enqueued while this one ran); running this one again would run '
                      || 'the key twice'
                 ELSE coalesce(%(error)s, error) END,
    claimed_by = NULL, lease_until = NULL,
    unique_key = CASE WHEN EXISTS (SELECT 1 FROM rival) THEN NULL ELSE unique_kept END,
    errors = CASE WHEN %(failure)s::jsonb IS NULL THEN errors ELSE jsonb_path_query_array(
        coalesce(errors, '[]'::jsonb) || jsonb_build_array(%(failure)s::jsonb || jsonb_build_object(
            'at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
            'worker', %(owner)s::text)),
        '$[last - $keep + 1 to last]', jsonb_build_object('keep', %(keep_errors)s::int)) END
WHERE id = %(id)s AND status = 'running' AND claimed_by = %(owner)s AND attempts = %(attempts)s
  AND cancel_requested_at IS NULL
RETURNING status, (SELECT id::text FROM rival) AS rival;

-- part: released_ready
-- The queues of the workflow steps released (released: queue, status) woken on %(channel)s.
ready AS (
    SELECT pg_notify(%(channel)s, q.queue)
    FROM (SELECT DISTINCT queue FROM released WHERE status = 'pending') AS q
)

-- part: workflow_ended
-- What follows the end of workflow steps that did not succeed (migration 0014), pasted into
-- dead_letter, cancel, finish_cancel and reclaim after each one's gone CTE (id, workflow, error:
-- the steps that ended failed or cancelled here). Leaves released (queue, status of each child
-- whose parent count changed) for the statement's ready CTE to wake the queues of.
doomed AS (
    -- Every step downstream of an ended one through edges that fail with it (a chain link, a
    -- fan-in under "then"), transitively: it will never run, so it ends failed now.
    SELECT e.child AS id, gone.id AS cause, gone.error
    FROM gone JOIN {workflow_edges} AS e ON e.parent = gone.id
    WHERE e.policy = 'fail'
    UNION
    SELECT e.child, d.cause, d.error
    FROM doomed AS d JOIN {workflow_edges} AS e ON e.parent = d.id
    WHERE e.policy = 'fail'
), ended AS (
    SELECT id, error FROM gone
    UNION
    SELECT id, 'step ' || min(cause::text) || ' failed: ' || min(error) FROM doomed GROUP BY id
), fed AS (
    -- Their children under a fan-in run with partial results ("then_partial") get the error at
    -- its position and one parent less (released at zero, as in ack_results).
    SELECT e.child, count(*)::int AS n,
           jsonb_object_agg(e.position::text, jsonb_build_object('queuey_failed',
               jsonb_build_object('job_id', ended.id::text, 'error', ended.error))) AS inputs
    FROM ended JOIN {workflow_edges} AS e ON e.parent = ended.id
    WHERE e.policy = 'partial'
    GROUP BY e.child
), unlinked AS (
    DELETE FROM {workflow_edges} AS e USING ended WHERE e.parent = ended.id
), failed_steps AS (
    UPDATE {table} AS c
    SET status = 'failed', processed_at = now(),
        error = 'workflow failed: step ' || d.cause::text || ' failed: ' || d.error
    FROM (SELECT DISTINCT ON (id) id, cause, error FROM doomed ORDER BY id, cause) AS d
    WHERE c.id = d.id AND c.status = 'waiting'
), released AS (
    {released_steps}

-- name: dead_letter
-- Dead letter, fenced (as ack): failed rows stay for a person, with the reason and the failed
-- attempt's error added to the row's errors (as in reschedule); a unique key is released
-- unless failed is a refused state (a debounced job wakes its queue, as ack says). Returns the
-- row dead-lettered.
WITH RECURSIVE dead AS (
    UPDATE {table}
    SET status = 'failed', error = %(reason)s, processed_at = now(), claimed_by = NULL,
        lease_until = NULL,
        errors = CASE WHEN %(failure)s::jsonb IS NULL THEN errors ELSE jsonb_path_query_array(
            coalesce(errors, '[]'::jsonb) || jsonb_build_array(%(failure)s::jsonb || jsonb_build_object(
                'at', to_char(now() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"+00:00"'),
                'worker', %(owner)s::text)),
            '$[last - $keep + 1 to last]', jsonb_build_object('keep', %(keep_errors)s::int)) END,
        unique_key = CASE WHEN unique_states & 8 = 0 THEN NULL ELSE unique_key END
    WHERE id = %(id)s AND status = 'running' AND claimed_by = %(owner)s
      AND attempts = %(attempts)s AND cancel_requested_at IS NULL
    RETURNING id, queue, unique_states, workflow, batch
), woke AS (
    SELECT pg_notify(%(channel)s, queue) FROM dead WHERE unique_states & 30 = 18
), gone AS (
    -- A workflow step (migration 0014) failed for good.
    SELECT id, workflow, %(reason)s::text AS error FROM dead WHERE workflow IS NOT NULL
), {workflow_ended}
), {released_ready}, batch_ended AS (
    SELECT batch, false AS ok FROM dead
), {batch_release}, {batch_wake}
SELECT id FROM dead WHERE (SELECT count(*) FROM woke) >= 0 AND (SELECT count(*) FROM ready) >= 0
  AND (SELECT count(*) FROM batch_woke) >= 0;

-- part: batch_release
-- The batches (migration 0017) of the rows a statement ended, pasted after its CTE batch_ended
-- (batch, ok: succeeded): each batch's counts change by its rows, in this statement (concurrent
-- ends serialize on the batch's row); the one that brings pending to zero releases the
-- callbacks, each given the batch's final counts: on_complete runs, on_success runs when no
-- member failed and otherwise ends cancelled, saying so. A callback row is released only from
-- waiting, so once.
batch_counted AS (
    UPDATE {batches} AS b
    SET pending = b.pending - x.n, done = b.done + x.ok, failed = b.failed + x.n - x.ok,
        ended_at = CASE WHEN b.pending = x.n THEN now() END
    FROM (SELECT batch, count(*)::int AS n, (count(*) FILTER (WHERE ok))::int AS ok
          FROM batch_ended WHERE batch IS NOT NULL GROUP BY batch) AS x
    WHERE b.id = x.batch
    RETURNING b.id, b.total, b.pending, b.done, b.failed, b.on_success, b.on_complete,
              CASE WHEN b.failed > 0 THEN b.on_success END AS skip
), batch_called AS (
    UPDATE {table} AS c
    SET status = CASE WHEN c.id = b.skip THEN 'cancelled' ELSE 'pending' END,
        available_at = now(), processed_at = CASE WHEN c.id = b.skip THEN now() END,
        error = CASE WHEN c.id = b.skip THEN format(
            'batch %%s: %%s of %%s jobs failed; its success callback does not run',
            b.id, b.failed, b.total) END,
        payload = json_build_object('__queuey_step__', c.step || jsonb_build_object(
            'inputs', jsonb_build_array(jsonb_build_object(
                'batch_id', b.id::text, 'total', b.total, 'done', b.done, 'failed', b.failed,
                'pending', 0))))
    FROM batch_counted AS b
    WHERE b.pending = 0 AND c.id IN (b.on_success, b.on_complete) AND c.status = 'waiting'
    RETURNING c.queue, c.status
)

-- part: batch_wake
-- Wakes the queues of the callbacks batch_release released, on %(channel)s.
batch_woke AS (
    SELECT pg_notify(%(channel)s, q.queue)
    FROM (SELECT DISTINCT queue FROM batch_called WHERE status = 'pending') AS q
)

-- part: batch_rows
-- The INSERT of a batch's rows (pasted into start_batch and add_to_batch): members (parents 0)
-- pending with the batch's id, callbacks (parents 1) waiting with their step.
INSERT INTO {table} (id, kind, queue, job_type, status, priority, payload, headers,
                     enqueued_at_ms, batch, step)
SELECT r.id, 'job', r.queue, r.job_type,
       CASE WHEN r.parents = 0 THEN 'pending' ELSE 'waiting' END, r.priority, p.payload,
       CASE WHEN r.parents = 0 THEN json_build_object('queuey-batch', %(batch)s::text)
            ELSE '{{}}'::json END,
       r.enqueued_at_ms, CASE WHEN r.parents = 0 THEN %(batch)s::uuid END, s.step
FROM unnest(%(ids)s::uuid[], %(queues)s::text[], %(job_types)s::text[], %(priorities)s::int[],
            %(enqueued_at_ms)s::bigint[], %(parents)s::int[])
     WITH ORDINALITY AS r(id, queue, job_type, priority, enqueued_at_ms, parents, n)
JOIN json_array_elements(%(payloads)s::json) WITH ORDINALITY AS p(payload, n) USING (n)
JOIN jsonb_array_elements(%(steps)s::jsonb) WITH ORDINALITY AS s(step, n) USING (n)

-- name: start_batch
-- A batch (migration 0017) in one statement: its row (every member pending), its members due
-- now (each carrying the batch's id, in the column and the header queuey-batch), and its
-- callbacks waiting (step: the builder that makes each from the batch's counts). Wakes the
-- members' queues.
WITH counted AS (
    INSERT INTO {batches} (id, total, pending, on_success, on_complete)
    VALUES (%(batch)s::uuid, %(total)s, %(total)s, %(on_success)s::uuid, %(on_complete)s::uuid)
), inserted AS (
    {batch_rows}
    ORDER BY n
    RETURNING queue, status
)
SELECT pg_notify(%(channel)s, q.queue)
FROM (SELECT DISTINCT queue FROM inserted WHERE status = 'pending') AS q;

-- name: add_to_batch
-- More members for batch %(batch)s, only while it has not ended (pending > 0: a running member
-- is itself pending, so its handler can always add): pending and total grow by %(total)s and
-- the members are inserted, due now, in one statement. Returns whether the batch took them.
WITH counted AS (
    UPDATE {batches} SET pending = pending + %(total)s, total = total + %(total)s
    WHERE id = %(batch)s::uuid AND pending > 0
    RETURNING id
), inserted AS (
    {batch_rows}
    WHERE EXISTS (SELECT 1 FROM counted)
    ORDER BY n
    RETURNING queue, status
), woke AS (
    SELECT pg_notify(%(channel)s, q.queue)
    FROM (SELECT DISTINCT queue FROM inserted WHERE status = 'pending') AS q
)
SELECT EXISTS (SELECT 1 FROM counted) AS added WHERE (SELECT count(*) FROM woke) >= 0;

-- name: batch_progress
-- Batch %(batch)s's counts: members in all, not ended, succeeded, ended otherwise.
SELECT id::text AS batch_id, total, pending, done, failed FROM {batches}
WHERE id = %(batch)s::uuid;

-- name: start_workflow
-- A workflow's steps in one statement: the roots pending (due now), every other step waiting
-- with its count of parents, and the edges from parents to children (position in the child's
-- inputs, failure policy). Each step's headers (the workflow's id and trace context) are its
-- envelope's at every run. Wakes the roots' queues.
WITH inserted AS (
    INSERT INTO {table} (id, kind, queue, job_type, status, priority, payload, enqueued_at_ms,
                         workflow, parents_left, step, headers)
    SELECT r.id, 'job', r.queue, r.job_type,
           CASE WHEN r.parents = 0 THEN 'pending' ELSE 'waiting' END,
           r.priority, p.payload, r.enqueued_at_ms, %(workflow)s::uuid, r.parents, s.step,
           h.headers
    FROM unnest(%(ids)s::uuid[], %(queues)s::text[], %(job_types)s::text[],
                %(priorities)s::int[], %(enqueued_at_ms)s::bigint[], %(parents)s::int[])
         WITH ORDINALITY AS r(id, queue, job_type, priority, enqueued_at_ms, parents, n)
    JOIN json_array_elements(%(payloads)s::json) WITH ORDINALITY AS p(payload, n) USING (n)
    JOIN jsonb_array_elements(%(steps)s::jsonb) WITH ORDINALITY AS s(step, n) USING (n)
    JOIN json_array_elements(%(headers)s::json) WITH ORDINALITY AS h(headers, n) USING (n)
    ORDER BY n
    RETURNING queue, status
), linked AS (
    INSERT INTO {workflow_edges} (parent, child, position, policy)
    SELECT * FROM unnest(%(edge_parents)s::uuid[], %(edge_children)s::uuid[],
                         %(edge_positions)s::int[], %(edge_policies)s::text[])
)
SELECT pg_notify(%(channel)s, q.queue)
FROM (SELECT DISTINCT queue FROM inserted WHERE status = 'pending') AS q;

-- name: complete
-- Success recorded inside the handler's own transaction (ctx.transaction()), fenced like every
-- settle: done only while this owner still holds the attempt it ran, so a worker that lost its
-- lease (or a job cancelled meanwhile) matches no row and the caller rolls the handler's
-- writes back with it. A unique key is released unless done is a refused state (a debounced
-- job wakes its queue at commit, as ack says). Returns the row completed.
WITH done AS (
    UPDATE {table}
    SET status = 'done', processed_at = now(), claimed_by = NULL, lease_until = NULL,
        unique_key = CASE WHEN unique_states & 4 = 0 THEN NULL ELSE unique_key END
    WHERE id = %(id)s AND status = 'running' AND claimed_by = %(owner)s
      AND attempts = %(attempts)s AND cancel_requested_at IS NULL
    RETURNING id, queue, unique_states, batch
), woke AS (
    SELECT pg_notify(%(channel)s, queue) FROM done WHERE unique_states & 30 = 18
), batch_ended AS (
    SELECT batch, true AS ok FROM done
), {batch_release}, {batch_wake}
SELECT id FROM done
WHERE (SELECT count(*) FROM woke) >= 0 AND (SELECT count(*) FROM batch_woke) >= 0;

-- part: cancel_marked
-- What a cancel writes to each row it targets (target: id, status, claimed_by; with m the row;
-- error, which differs, is written beside it): a row that runs stays running, its cancel asked
-- for (its worker stops it); any other ends cancelled now, its unique key released.
status = CASE WHEN target.status = 'running' THEN 'running' ELSE 'cancelled' END,
processed_at = CASE WHEN target.status = 'running' THEN NULL ELSE now() END,
unique_key = CASE WHEN target.status = 'running' THEN m.unique_key END,
cancel_requested_at = CASE WHEN target.status = 'running'
                           THEN coalesce(m.cancel_requested_at, now()) END

-- part: cancel_job
-- Cancel one job (the `cancel` statement below and the dashboard's cancel, which adds its audit
-- row after it): a pending row (due or scheduled) or a waiting workflow step becomes cancelled
-- and releases its unique key; the workflow steps after it fail with it or get its error, as
-- dead_letter says. A running one stays running, held by its worker, with its cancel asked for
-- (cancel_requested_at): every other outcome of its run is then refused by the fence, and the
-- row becomes cancelled when that run ends (``finish_cancel``), or when its lease expires. Its
-- worker (the owner) is told on %(channel)s with "<owner> <id>"; the queues of the steps it
-- released are woken on %(wake_channel)s. Ends with job_cancelled (was: the status the row had;
-- kind, queue), which runs every notification when read.
target AS (
    SELECT id, status, claimed_by FROM {table}
    WHERE id = %(id)s::uuid AND status IN ('pending', 'running', 'waiting')
    FOR UPDATE
), cancelled AS (
    UPDATE {table} AS m
    SET {cancel_marked},
        error = CASE WHEN target.status = 'running' THEN m.error ELSE 'cancelled' END
    FROM target
    WHERE m.id = target.id
    RETURNING target.status AS was, target.claimed_by AS owner, m.id, m.workflow, m.batch,
              m.kind, m.queue
), gone AS (
    SELECT id, workflow, 'cancelled'::text AS error FROM cancelled
    WHERE workflow IS NOT NULL AND was <> 'running'
), {workflow_ended}
), ready AS (
    SELECT pg_notify(%(wake_channel)s, q.queue)
    FROM (SELECT DISTINCT queue FROM released WHERE status = 'pending') AS q
), batch_ended AS (
    SELECT batch, false AS ok FROM cancelled WHERE was <> 'running'
), {batch_release}, batch_woke AS (
    SELECT pg_notify(%(wake_channel)s, q.queue)
    FROM (SELECT DISTINCT queue FROM batch_called WHERE status = 'pending') AS q
), told AS (
    SELECT pg_notify(%(channel)s, owner || ' ' || id::text) FROM cancelled WHERE was = 'running'
), job_cancelled AS (
    SELECT was, kind, queue FROM cancelled
    WHERE (SELECT count(*) FROM ready) >= 0 AND (SELECT count(*) FROM batch_woke) >= 0
      AND (SELECT count(*) FROM told) >= 0
)

-- name: cancel
-- Cancel one job (cancel_job). Returns the status the row had.
WITH RECURSIVE {cancel_job}
SELECT was FROM job_cancelled;

-- name: finish_cancel
-- The run of a row whose cancel was asked for has ended: cancelled now, fenced by (owner,
-- attempts); its unique key is released; the workflow steps after it fail with it or get its
-- error, as dead_letter says.
WITH RECURSIVE ended_run AS (
    UPDATE {table}
    SET status = 'cancelled', processed_at = now(), error = 'cancelled', claimed_by = NULL,
        lease_until = NULL, unique_key = NULL, cancel_requested_at = NULL
    WHERE id = %(id)s AND status = 'running' AND claimed_by = %(owner)s
      AND attempts = %(attempts)s AND cancel_requested_at IS NOT NULL
    RETURNING id, workflow, batch
), gone AS (
    SELECT id, workflow, 'cancelled'::text AS error FROM ended_run WHERE workflow IS NOT NULL
), {workflow_ended}
), {released_ready}, batch_ended AS (
    SELECT batch, false AS ok FROM ended_run
), {batch_release}, {batch_wake}
SELECT id FROM ended_run
WHERE (SELECT count(*) FROM ready) >= 0 AND (SELECT count(*) FROM batch_woke) >= 0;

-- name: claim_state
-- Why a fenced settle of run %(attempts)s of row %(id)s was refused: whether this owner still
-- holds that run (then a cancel was asked for) or not (its lease was lost).
SELECT (status = 'running' AND claimed_by = %(owner)s AND attempts = %(attempts)s) AS held,
       cancel_requested_at IS NOT NULL AS cancel_requested
FROM {table} WHERE id = %(id)s::uuid;

-- part: held_rows
-- The rows of %(ids)s this owner still runs (held), and those of them no other transaction
-- has locked (free), locked here in id order. The heartbeat never waits for a row lock: a row
-- being settled, cancelled or completed in a handler's transaction right now is skipped (its
-- lease is renewed at the next beat, and it is still reported held), so one locked row never
-- holds back the renewal of the others, and the heartbeat cannot deadlock with an ack that
-- locks the same rows in another order. Pasted into extend and extend_progress.
held AS (
    SELECT id, cancel_requested_at IS NOT NULL AS cancel_requested FROM {table}
    WHERE id = ANY(%(ids)s::uuid[]) AND status = 'running' AND claimed_by = %(owner)s
), free AS (
    SELECT id FROM {table}
    WHERE id IN (SELECT id FROM held) AND status = 'running' AND claimed_by = %(owner)s
    ORDER BY id
    FOR NO KEY UPDATE SKIP LOCKED
)

-- part: lease_pushed
-- A heartbeat's new lease for a row it extends: %(lease)s seconds from now.
lease_until = now() + make_interval(secs => %(lease)s::float8)

-- part: held_answer
-- What a heartbeat returns (extended: the rows it pushed; held, free: held_rows): each row this
-- owner still runs, with whether its cancel was asked for.
SELECT id::text AS id, cancel_requested FROM extended
UNION ALL
SELECT id::text, cancel_requested FROM held WHERE id NOT IN (SELECT id FROM free)

-- name: extend
-- Heartbeat: push the lease of rows this owner still runs (held_rows: the free ones now);
-- returns them, each with whether its cancel was asked for (a notification may have been
-- missed), so a held row that is missing is no longer this owner's (its lease was lost:
-- reclaimed after a stall).
WITH {held_rows}, extended AS (
    UPDATE {table} AS m
    SET {lease_pushed}
    FROM free
    WHERE m.id = free.id AND m.status = 'running' AND m.claimed_by = %(owner)s
    RETURNING m.id, m.cancel_requested_at IS NOT NULL AS cancel_requested
)
{held_answer};

-- name: extend_progress
-- The heartbeat of extend, carrying the last progress the handlers of some of the rows reported
-- (ctx.progress: %(progress_ids)s, each with its JSON text), written with the lease: no round
-- trip of its own. Returns what extend returns.
WITH reported AS (
    SELECT * FROM unnest(%(progress_ids)s::uuid[], %(progress)s::text[]) AS r(id, progress)
), {held_rows}, extended AS (
    UPDATE {table} AS m
    SET {lease_pushed},
        progress = coalesce((SELECT r.progress::jsonb FROM reported AS r WHERE r.id = m.id),
                            m.progress)
    FROM free
    WHERE m.id = free.id AND m.status = 'running' AND m.claimed_by = %(owner)s
    RETURNING m.id, m.cancel_requested_at IS NOT NULL AS cancel_requested
)
{held_answer};

-- name: reclaim
-- Rows whose lease expired go back to pending (a redelivery, not a handler failure), or to
-- failed once they have lost %(max_redeliveries)s leases (a crash loop ends). Back to pending,
-- a unique job takes its key back, or ends cancelled when a newer job holds it (as reschedule
-- says); failed releases it unless failed is a refused state. A row whose cancel was asked for
-- ends cancelled (its worker is gone, so is its run).
WITH RECURSIVE expired AS (
    SELECT m.id, m.cancel_requested_at IS NOT NULL AS asked,
           m.redeliveries + 1 >= %(max_redeliveries)s AS spent,
           (SELECT h.id FROM {table} AS h
            WHERE h.unique_key = m.unique_kept AND h.id <> m.id) AS rival
    FROM {table} AS m
    WHERE m.status = 'running' AND m.lease_until < now()
    FOR UPDATE OF m SKIP LOCKED
), reclaimed AS (
UPDATE {table} AS m
SET redeliveries = m.redeliveries + CASE WHEN e.asked THEN 0 ELSE 1 END,
    status = CASE WHEN e.asked THEN 'cancelled' WHEN e.spent THEN 'failed'
                  WHEN e.rival IS NOT NULL THEN 'cancelled' ELSE 'pending' END,
    error = CASE WHEN e.asked THEN 'cancelled'
                 WHEN e.spent
                 THEN 'worker lost ' || (m.redeliveries + 1)::text
                      || ' times: the lease expired while the job was running each time'
                 WHEN e.rival IS NOT NULL
                 THEN 'superseded: job ' || e.rival::text || ' holds its unique key (enqueued '
                      || 'while this one ran); running this one again would run the key twice'
                 ELSE 'the worker running this job was lost (lease expired)' END,
    processed_at = CASE WHEN e.asked OR e.spent OR e.rival IS NOT NULL THEN now() END,
    claimed_by = NULL, lease_until = NULL, cancel_requested_at = NULL,
    unique_key = CASE WHEN e.asked THEN NULL
                      WHEN e.spent AND m.unique_states & 8 = 0 THEN NULL
                      WHEN e.spent THEN m.unique_key
                      WHEN e.rival IS NOT NULL THEN NULL
                      ELSE m.unique_kept END
FROM expired AS e
WHERE m.id = e.id
RETURNING m.id, m.status, m.workflow, m.error, m.batch
), gone AS (
    -- A workflow step (migration 0014) that ended here failed or cancelled: as dead_letter
    -- says, its children under a partial fan-in get its error and one parent less (released
    -- at zero); the steps that fail with it end failed.
    SELECT id, workflow, error FROM reclaimed
    WHERE workflow IS NOT NULL AND status IN ('failed', 'cancelled')
), {workflow_ended}
), {released_ready}, batch_ended AS (
    SELECT batch, false AS ok FROM reclaimed WHERE status IN ('failed', 'cancelled')
), {batch_release}, {batch_wake}
SELECT id::text AS id, status FROM reclaimed
WHERE (SELECT count(*) FROM ready) >= 0 AND (SELECT count(*) FROM batch_woke) >= 0;

-- name: expire
-- Pending rows past their queue's message TTL are dead-lettered, never dropped; a member of a
-- batch (migration 0017) is counted failed in its batch. One row per row expired.
WITH expired AS (
    UPDATE {table}
    SET status = 'failed', error = 'expired', processed_at = now(),
        unique_key = CASE WHEN unique_states & 8 = 0 THEN NULL ELSE unique_key END
    WHERE status = 'pending' AND expires_at <= now()
    RETURNING batch
), batch_ended AS (
    SELECT batch, false AS ok FROM expired
), {batch_release}, {batch_wake}
SELECT batch FROM expired WHERE (SELECT count(*) FROM batch_woke) >= 0;

-- name: prune
-- Retention: delete up to %(limit)s done rows older than %(retain)s seconds, and up to as many
-- batches (migration 0017) that ended that long ago (their counts go with them).
WITH batches_gone AS (
    DELETE FROM {batches}
    WHERE id IN (SELECT id FROM {batches}
                 WHERE ended_at < now() - make_interval(secs => %(retain)s::float8)
                 LIMIT %(limit)s)
)
DELETE FROM {table}
WHERE id IN (SELECT id FROM {table}
             WHERE status = 'done' AND processed_at < now() - make_interval(secs => %(retain)s::float8)
             LIMIT %(limit)s);

-- name: count_pending
-- Rows of a queue due now.
SELECT count(*) AS pending FROM {table}
WHERE status = 'pending' AND kind = %(kind)s AND queue = %(queue)s AND available_at <= now();

-- name: list_dead
-- Failed rows of a queue, oldest first.
SELECT id::text AS id, job_type, attempts, deferrals, priority, payload, headers, published_by,
       enqueued_at_ms, coalesce(error, '') AS reason
FROM {table}
WHERE status = 'failed' AND kind = %(kind)s AND queue = %(queue)s
ORDER BY processed_at, seq
LIMIT %(limit)s;

-- name: purge
-- Delete every row of the given typed queues (the demo starts clean).
DELETE FROM {table} WHERE kind = 'job' AND queue = ANY(%(queues)s::text[]);

-- name: schema_version
-- The highest migration applied.
SELECT coalesce(max(version), 0) AS version FROM {migrations};

-- name: applied_versions
-- Every migration applied, in order (a version missing below the highest is applied too).
SELECT version FROM {migrations} ORDER BY version;

-- name: migrate_lock
-- Serialise migrations of one schema: a transaction-level advisory lock keyed by its name,
-- released when the migrating transaction ends.
SELECT pg_advisory_xact_lock(hashtext('queuey.migrate.' || %(schema)s));

-- name: migrate_bookkeeping
-- The schema and the table recording which migrations it has, when missing.
CREATE SCHEMA IF NOT EXISTS {schema};
CREATE TABLE IF NOT EXISTS {migrations} (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
);

-- name: record_migration
-- One migration applied (in the transaction that applied it).
INSERT INTO {migrations} (version, name) VALUES (%(version)s, %(name)s);

-- Periodic schedules (the scheduler of every worker, and `queuey schedules`).

-- name: clock
-- The database's clock: every schedule's slots are read on it.
SELECT now() AS now;

-- name: job_state
-- One row's status, by id (a schedule skips a slot while its previous firing is live).
SELECT status FROM {table} WHERE id = %(id)s::uuid;

-- name: register_schedules
-- The schedules a worker knows: new ones created, known ones given their expression and time
-- zone; their last slot and paused flag are kept. A changed expression or zone takes effect
-- now (declared_at, migration 0008): its slots count from then.
INSERT INTO {schedules} AS s (name, expression, tz)
SELECT * FROM unnest(%(names)s::text[], %(expressions)s::text[], %(zones)s::text[])
ON CONFLICT (name) DO UPDATE
SET expression = EXCLUDED.expression, tz = EXCLUDED.tz, declared_at = now(), updated_at = now()
WHERE (s.expression, s.tz) IS DISTINCT FROM (EXCLUDED.expression, EXCLUDED.tz);

-- name: list_schedules
-- The known schedules (of %(names)s only, when not NULL), by name.
SELECT name, expression, tz, last_slot, last_fired_at, last_job_id::text AS last_job_id, paused,
       declared_at
FROM {schedules}
WHERE %(names)s::text[] IS NULL OR name = ANY(%(names)s::text[])
ORDER BY name;

-- name: record_fired
-- A slot fired (or was found fired by another worker): the last slot only moves forward.
UPDATE {schedules}
SET last_slot = %(slot)s, last_fired_at = now(), last_job_id = %(job_id)s::uuid
WHERE name = %(name)s AND (last_slot IS NULL OR last_slot < %(slot)s);

-- name: pause_schedule
-- Pause or resume one schedule.
UPDATE {schedules} SET paused = %(paused)s, updated_at = now() WHERE name = %(name)s;

-- The LISTEN session (backends/postgres/_listen.py), on its own connection outside the pool.

-- name: listen
-- Receive the notifications of one channel; {channel} is composed per call as an identifier.
LISTEN {channel};

-- name: ping
-- Health check of the LISTEN session.
SELECT 1 AS alive;

-- Operations
-- The `queuey status` and `queuey failed ...` commands (backends/postgres/_admin.py). Retry and
-- discard touch only failed rows, in one statement each, so they are safe while workers run.

-- name: ops_status
-- Per (kind, queue): due, scheduled, running, failed and waiting (workflow steps whose parents
-- have not ended) rows, and how long the oldest due row has waited (seconds, NULL when none).
-- One arm per status so each can use its partial index; done rows are never read.
WITH live AS (
    SELECT kind, queue, status, available_at FROM {table} WHERE status = 'pending'
    UNION ALL
    SELECT kind, queue, status, NULL FROM {table} WHERE status = 'running'
    UNION ALL
    SELECT kind, queue, status, NULL FROM {table} WHERE status = 'failed'
    UNION ALL
    SELECT kind, queue, status, NULL FROM {table} WHERE status = 'waiting'
)
SELECT kind, queue,
       count(*) FILTER (WHERE status = 'pending' AND available_at <= now()) AS pending,
       count(*) FILTER (WHERE status = 'pending' AND available_at > now()) AS scheduled,
       count(*) FILTER (WHERE status = 'running') AS running,
       count(*) FILTER (WHERE status = 'failed') AS failed,
       extract(epoch FROM now() - min(available_at) FILTER (WHERE status = 'pending'
                                                             AND available_at <= now()))::float8
           AS oldest_pending_secs,
       count(*) FILTER (WHERE status = 'waiting') AS waiting
FROM live
GROUP BY kind, queue
ORDER BY kind, queue;

-- name: ops_failed
-- Failed rows (or cancelled ones, as %(status)s says; of one queue when %(queue)s is not
-- NULL), oldest first, with the first line of their error.
SELECT id::text AS id, kind, queue, job_type, attempts, processed_at,
       split_part(coalesce(error, ''), E'\n', 1) AS error
FROM {table}
WHERE status = %(status)s::text AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
ORDER BY processed_at, seq
LIMIT %(limit)s;

-- name: ops_show
-- One row by id, whatever its status (the caller says when it is not failed).
SELECT id::text AS id, kind, queue, job_type, status, priority, attempts, redeliveries,
       deferrals, payload, headers, published_by, error, created_at, available_at, processed_at,
       coalesce(errors, '[]'::jsonb) AS errors
FROM {table}
WHERE id = %(id)s::uuid;

-- name: job_info
-- One job by id, whatever its status, as a JobInfo (a backend's job lookup, `queuey jobs show`).
SELECT id::text AS id, kind, queue, job_type, status AS state, attempts, redeliveries, deferrals,
       priority, available_at AS due_at, error AS last_error, payload, result, progress,
       coalesce(errors, '[]'::jsonb) AS errors,
       cancel_requested_at IS NOT NULL AS cancel_requested
FROM {table}
WHERE id = %(id)s::uuid;

-- name: queue_exists
-- Whether any row, of either kind and any status, is on a queue (an operator's --queue may be a
-- typo). The claim index answers for pending rows, migration 0004's index for the others.
SELECT EXISTS (SELECT 1 FROM {table}
               WHERE kind IN ('job', 'topic') AND queue = %(queue)s AND status = 'pending')
    OR EXISTS (SELECT 1 FROM {table}
               WHERE kind IN ('job', 'topic') AND queue = %(queue)s AND status <> 'pending')
    AS known;

-- part: rearm_steps
-- An operator's retry re-arms the workflow steps that ended failed only because a step retried
-- here had failed (migration 0014), pasted into retry_rows after its
-- touched CTE (the rows put back to pending: id). Such a step never ran (its payload was never
-- built) and its error names the retried step ("workflow failed: step <id> failed: ...", the
-- root cause every step downstream of it names). It waits again: its parents that are done give
-- their stored results at their positions, every other parent is counted in parents_left and
-- gets its edge back (a "fail" edge: only those doom a step). Its parents are locked first, so
-- one that completes meanwhile is seen done (or feeds the step through its edge after this
-- commits). A step with a parent that failed (or was cancelled) for another reason, or whose
-- row was deleted, stays failed, and so does every re-armable step after it. A "then_partial"
-- fan-in that already received a failure as an input keeps it: it is not re-armed.
doomed_by AS (
    SELECT m.id, m.step FROM {table} AS m
    WHERE m.status = 'failed' AND jsonb_typeof(m.step) = 'object'
      AND (m.payload -> '__queuey_step__') IS NULL
      AND substring(m.error FROM '^workflow failed: step ([0-9a-f-]{{36}}) failed: ')::uuid
          IN (SELECT id FROM touched)
), parent_of AS (
    SELECT d.id AS child, (p.n - 1)::int AS position, p.parent::uuid AS parent
    FROM doomed_by AS d,
         jsonb_array_elements_text(d.step -> 'parents') WITH ORDINALITY AS p(parent, n)
), parent_rows AS (
    SELECT m.id, m.status, m.result FROM {table} AS m
    WHERE m.id IN (SELECT parent FROM parent_of)
      AND m.id NOT IN (SELECT id FROM touched) AND m.id NOT IN (SELECT id FROM doomed_by)
    ORDER BY m.id
    FOR UPDATE
), blocked AS (
    SELECT po.child AS id
    FROM parent_of AS po LEFT JOIN parent_rows AS p ON p.id = po.parent
    WHERE po.parent NOT IN (SELECT id FROM touched)
      AND po.parent NOT IN (SELECT id FROM doomed_by)
      AND (p.id IS NULL OR p.status NOT IN ('done', 'pending', 'running', 'waiting'))
    UNION
    SELECT po.child FROM blocked AS b JOIN parent_of AS po ON po.parent = b.id
), rearmed AS (
    UPDATE {table} AS c
    SET status = 'waiting', processed_at = NULL, error = NULL, parents_left = w.waits_for,
        inputs = w.inputs
    FROM (SELECT po.child,
                 count(*) FILTER (WHERE p.status IS DISTINCT FROM 'done')::int AS waits_for,
                 coalesce(jsonb_object_agg(po.position::text, coalesce(p.result::jsonb, 'null'))
                          FILTER (WHERE p.status = 'done'), '{{}}'::jsonb) AS inputs
          FROM parent_of AS po LEFT JOIN parent_rows AS p ON p.id = po.parent
          WHERE po.child NOT IN (SELECT id FROM blocked)
          GROUP BY po.child) AS w
    WHERE c.id = w.child AND c.status = 'failed'
    RETURNING c.id
), relinked AS (
    INSERT INTO {workflow_edges} (parent, child, position, policy)
    SELECT po.parent, po.child, po.position, 'fail'
    FROM parent_of AS po LEFT JOIN parent_rows AS p ON p.id = po.parent
    WHERE po.child IN (SELECT id FROM rearmed) AND p.status IS DISTINCT FROM 'done'
    ON CONFLICT (parent, child) DO NOTHING
)

-- part: retry_rows
-- An operator's retry (ops_retry, and the dashboard's retry, which adds its confirmation and
-- audit row around it), pasted after the statement's asked CTE (id, seq, unique_kept, step,
-- payload of the failed or cancelled rows asked for): back to pending, due now, with a fresh
-- attempt, redelivery and deferral count, the same message TTL window from now, and the last
-- error kept; a member of a batch (migration 0017), counted failed there already, leaves its
-- batch. A unique job takes its key back (unique_kept): one whose key
-- another job holds is left alone (ops_held names that job), and of several rows retried
-- together under one key only the newest goes back, so a key never runs twice. A workflow step
-- that never ran (an upstream step failed or it was cancelled while waiting: its payload was
-- never built) is left alone too (ops_held names it), and the steps that failed only because a
-- row retried here did wait again (rearm_steps). Leaves touched (id, kind, queue).
candidates AS (
    SELECT id, seq, unique_kept FROM asked
    WHERE jsonb_typeof(step) IS DISTINCT FROM 'object'
       OR (payload -> '__queuey_step__') IS NOT NULL
), chosen AS (
    SELECT c.id FROM candidates AS c
    WHERE c.unique_kept IS NULL
       OR (NOT EXISTS (SELECT 1 FROM {table} AS h
                       WHERE h.unique_key = c.unique_kept AND h.id <> c.id)
           AND c.seq = (SELECT max(o.seq) FROM candidates AS o
                        WHERE o.unique_kept = c.unique_kept))
), touched AS (
    UPDATE {table}
    SET status = 'pending', attempts = 0, redeliveries = 0, deferrals = 0, available_at = now(),
        expires_at = now() + (expires_at - available_at), processed_at = NULL,
        claimed_at = NULL, claimed_by = NULL, lease_until = NULL, unique_key = unique_kept,
        batch = NULL, headers = CASE WHEN batch IS NULL THEN headers
                                     ELSE (headers::jsonb - 'queuey-batch')::json END
    WHERE id IN (SELECT id FROM chosen) AND status IN ('failed', 'cancelled')
    RETURNING id, kind, queue
), {rearm_steps}

-- name: ops_retry
-- Failed rows (or cancelled ones: %(status)s; one id and/or one queue when not NULL) retried
-- (retry_rows); one notification per queue wakes its workers. Returns the count per (kind,
-- queue).
WITH RECURSIVE asked AS (
    SELECT id, seq, unique_kept, step, payload FROM {table}
    WHERE status = %(status)s::text
      AND (%(id)s::uuid IS NULL OR id = %(id)s::uuid)
      AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
), {retry_rows}, counted AS (
    SELECT kind, queue, count(*)::int AS touched FROM touched GROUP BY kind, queue
)
SELECT counted.kind, counted.queue, counted.touched AS count
FROM counted, LATERAL pg_notify(%(channel)s, counted.queue)
ORDER BY counted.kind, counted.queue;

-- name: ops_held
-- Failed rows (or cancelled ones: %(status)s; one id and/or one queue when not NULL) that a
-- retry leaves alone, oldest first: because another job holds their unique key (the row, the
-- holder and the holder's status), or because the row is a workflow step that never ran
-- (never_built; holder is the failed upstream step its error names, '' when none).
SELECT id, holder, holder_status, never_built FROM (
    SELECT m.id::text AS id, h.id::text AS holder, h.status AS holder_status,
           false AS never_built, m.processed_at, m.seq
    FROM {table} AS m JOIN {table} AS h ON h.unique_key = m.unique_kept AND h.id <> m.id
    WHERE m.status = %(status)s::text
      AND (%(id)s::uuid IS NULL OR m.id = %(id)s::uuid)
      AND (%(queue)s::text IS NULL OR m.queue = %(queue)s::text)
    UNION ALL
    SELECT m.id::text, coalesce(substring(m.error FROM '^workflow failed: step ([0-9a-f-]+) '), ''),
           'failed', true, m.processed_at, m.seq
    FROM {table} AS m
    WHERE m.status = %(status)s::text
      AND (%(id)s::uuid IS NULL OR m.id = %(id)s::uuid)
      AND (%(queue)s::text IS NULL OR m.queue = %(queue)s::text)
      AND jsonb_typeof(m.step) = 'object' AND (m.payload -> '__queuey_step__') IS NULL
) AS left_alone
ORDER BY processed_at, seq
LIMIT 100;

-- part: discard_rows
-- An operator's discard (ops_discard, and the dashboard's discard), pasted after the
-- statement's asked CTE (id of the failed or cancelled rows asked for): those rows deleted.
-- Leaves touched (kind, queue).
touched AS (
    DELETE FROM {table}
    WHERE id IN (SELECT id FROM asked) AND status IN ('failed', 'cancelled')
    RETURNING kind, queue
)

-- name: ops_discard
-- Delete failed rows (or cancelled ones: %(status)s; one id and/or one queue when not NULL;
-- discard_rows). Returns the count per (kind, queue).
WITH asked AS (
    SELECT id FROM {table}
    WHERE status = %(status)s::text
      AND (%(id)s::uuid IS NULL OR id = %(id)s::uuid)
      AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
), {discard_rows}
SELECT kind, queue, count(*)::int AS count FROM touched GROUP BY kind, queue ORDER BY kind, queue;

-- name: record_action
-- One audit row for an action taken from the command line (``queuey failed retry|discard``,
-- ``queuey jobs cancel``, ``queuey schedules pause|resume``): who, what, on which rows and how
-- many, in the table the dashboard's audit log lists (migration 0004).
INSERT INTO {audit} (actor, action, kind, queue, job_id, filter, count)
VALUES (%(actor)s, %(action)s, %(kind)s, %(queue)s, %(job_id)s::uuid, %(filter)s, %(count)s);

-- name: workflow_steps
-- The steps of one workflow (%(id)s: its id, or the job id of one of its steps) in the order
-- they were enqueued (parents first): id, job name, queue, status, step (its builder and its
-- parents' ids, NULL for a root or a job a step fanned out to), headers (a job a step fanned
-- out to names that step in queuey-added-by) and last error.
SELECT m.workflow::text AS workflow, m.id::text AS id, m.job_type, m.queue, m.status, m.step,
       m.headers, m.error
FROM {table} AS m
WHERE m.workflow = coalesce((SELECT workflow FROM {table} WHERE id = %(id)s::uuid), %(id)s::uuid)
ORDER BY m.seq;

-- name: workflow_list
-- The %(limit)s most recently enqueued workflows, newest first: id, the job name of the last
-- step enqueued, when the first was enqueued (epoch ms) and how many steps are in each status.
SELECT workflow::text AS workflow, (array_agg(job_type ORDER BY seq DESC))[1] AS last_step,
       min(enqueued_at_ms) AS enqueued_at_ms,
       jsonb_object_agg(status, n) AS counts
FROM (SELECT workflow, status, count(*)::int AS n, max(seq) AS seq, min(enqueued_at_ms)
             AS enqueued_at_ms, (array_agg(job_type ORDER BY seq DESC))[1] AS job_type
      FROM {table} WHERE workflow IS NOT NULL GROUP BY workflow, status) AS per_status
GROUP BY workflow
ORDER BY min(enqueued_at_ms) DESC, workflow
LIMIT %(limit)s;

-- name: cancel_workflow
-- Cancel a workflow (%(id)s: its id, or the job id of one of its steps): each pending or waiting
-- step becomes cancelled at once; each running one keeps running with its cancel asked for and
-- its worker told on %(channel)s (as cancel does: it ends cancelled when its run does). The
-- edges into the steps cancelled and out of those that will not run go: no end feeds them.
-- Rows are locked in id order. Returns how many were cancelled and how many told.
WITH target AS (
    SELECT id, status, claimed_by FROM {table}
    WHERE workflow = coalesce((SELECT workflow FROM {table} WHERE id = %(id)s::uuid),
                              %(id)s::uuid)
      AND status IN ('pending', 'running', 'waiting')
    ORDER BY id
    FOR UPDATE
), cancelled AS (
    UPDATE {table} AS m
    SET {cancel_marked},
        error = CASE WHEN target.status = 'running' THEN m.error ELSE 'workflow cancelled' END
    FROM target
    WHERE m.id = target.id
    RETURNING target.status AS was, target.claimed_by AS owner, m.id
), unlinked AS (
    DELETE FROM {workflow_edges} AS e USING cancelled AS c
    WHERE e.child = c.id OR (e.parent = c.id AND c.was <> 'running')
), told AS (
    SELECT pg_notify(%(channel)s, owner || ' ' || id::text) FROM cancelled WHERE was = 'running'
)
SELECT count(*) FILTER (WHERE was <> 'running')::int AS cancelled,
       count(*) FILTER (WHERE was = 'running')::int AS requested
FROM cancelled
WHERE (SELECT count(*) FROM told) >= 0;

-- name: workflow_of
-- The workflow job %(id)s is a step of (NULL: none; no row: no such job).
SELECT workflow::text FROM {table} WHERE id = %(id)s::uuid;
