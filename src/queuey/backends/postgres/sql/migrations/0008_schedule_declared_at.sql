-- 0008: when each schedule's current declaration (its expression and time zone) replaced an
-- earlier one. A worker that registers a changed expression or zone sets it to now(): the slots
-- of the new declaration count from then, so a changed schedule fires from its next slot and
-- never a slot its earlier declaration did not have. NULL while a schedule keeps the declaration
-- it was first registered with (its last slot alone says where it got to, as before).
ALTER TABLE {schedules} ADD COLUMN declared_at timestamptz;
