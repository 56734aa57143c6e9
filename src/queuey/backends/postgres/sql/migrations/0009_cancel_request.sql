-- 0009: a cancel that reaches a running row is a request, not the end of the run. The row stays
-- running, held and heartbeated by its worker (so nothing else may claim, retry or discard it),
-- and becomes cancelled when that run ends (or when its lease expires, its worker gone).
-- NULL: no cancel was asked for; else when it was.
ALTER TABLE {table} ADD COLUMN cancel_requested_at timestamptz;
