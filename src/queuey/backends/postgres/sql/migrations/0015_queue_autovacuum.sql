-- 0015: per-table autovacuum settings for the queue table. Every job is inserted, updated when
-- claimed, updated when settled and deleted by retention, so the table gathers dead row
-- versions far faster than the defaults expect (vacuum after 20% of rows changed). Vacuum and
-- analyze it after 1% / 2% of rows changed, and never throttle its vacuum. These are storage
-- parameters only: no rewrite, no lock beyond a brief SHARE UPDATE EXCLUSIVE, and they apply
-- (and do nothing) on a server running with autovacuum = off.
ALTER TABLE {table} SET (
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);
