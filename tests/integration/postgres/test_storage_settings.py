"""The queue table's storage settings come with the schema (migration 0015): autovacuum runs
on it after 1% of rows changed, analyze after 2%, unthrottled."""

from __future__ import annotations

import pytest
from psycopg import sql

from tests.integration.postgres.dashboard_helpers import execute

pytestmark = pytest.mark.postgres


async def test_the_queue_table_is_vacuumed_early_and_unthrottled(
    database_url: str, pg_schema: str
) -> None:
    found = await execute(
        database_url,
        sql.SQL(
            "SELECT unnest(c.reloptions) FROM pg_class c JOIN pg_namespace n "
            "ON n.oid = c.relnamespace WHERE n.nspname = {} AND c.relname = 'queue_message'"
        ).format(sql.Literal(pg_schema)),
    )
    assert sorted(row[0] for row in found) == [
        "autovacuum_analyze_scale_factor=0.02",
        "autovacuum_vacuum_cost_delay=0",
        "autovacuum_vacuum_scale_factor=0.01",
    ]
