-- 0020: the pace rows of rate limits (0016) are found by their primary key only. An index on
-- (kind, queue, tat) let a claim's generic plan read a key's pace through it (the same estimate
-- as the primary key while the table had no statistics), scanning every pace row of the queue
-- for each key considered: 1.1 s a claim beside 20,000 keys' rows. claim_limited deletes passed
-- paces through an index on tat alone, which a lookup by key cannot use.
DROP INDEX IF EXISTS {schema}.{pace_age_index};
CREATE INDEX IF NOT EXISTS {pace_tat_index} ON {flow_pace} (tat);
