"""``queuey schedules list|pause|resume``: the periodic schedules workers registered in the
database, and pausing one for every worker at once.

``list`` prints name, expression, time zone, next slot (on the database clock), last slot fired
and whether it is paused; ``--json`` prints a list of objects with those keys (times as ISO
8601 UTC, ``null`` when none). Exit codes: 0 done, 1 no such schedule, 2 bad usage, 3 the
database cannot be reached.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click
from rich.table import Table
from rich.text import Text

from queuey._terminal import printable
from queuey.cli._admin import admin_for
from queuey.cli._options import DATABASE_URL, SCHEMA, json_option
from queuey.cli._root import EXIT_NOT_FOUND, echo_json, fail, main, require, run_async, wide_console
from queuey.errors import ConfigError
from queuey.schedule import ScheduleRecord, Timing

__all__ = ["schedule_rows"]


@main.group("schedules")
def schedules() -> None:
    """List, pause and resume periodic schedules (PostgreSQL)."""


async def _with_backend(url: str, schema: str, action: Any) -> Any:
    from queuey.backends.postgres import PostgresBackend

    async with PostgresBackend(url, schema=schema, pool_size=1) as backend:
        return await action(backend)


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def schedule_rows(records: list[ScheduleRecord], now: datetime) -> list[dict[str, Any]]:
    """One JSON-ready row per schedule: name, expression, tz, next_slot, last_fired (the last
    slot fired), last_fired_at, last_job_id, paused."""
    rows = []
    for record in records:
        try:
            upcoming: str | None = _iso(Timing.parse(record.expression, record.tz).next_after(now))
        except ConfigError:
            upcoming = None  # written by a newer queuey: shown, not computed
        rows.append(
            {
                "name": record.name,
                "expression": record.expression,
                "tz": record.tz,
                "next_slot": upcoming,
                "last_fired": _iso(record.last_slot),
                "last_fired_at": _iso(record.last_fired_at),
                "last_job_id": record.last_job_id,
                "paused": record.paused,
            }
        )
    return rows


@schedules.command("list")
@DATABASE_URL
@SCHEMA
@json_option("the module help")
def list_command(database_url: str | None, schema: str, as_json: bool) -> None:
    """List the schedules: name, expression, time zone, next slot, last fired, paused."""
    url = require(database_url, "database url", "QUEUEY_DATABASE_URL")

    async def read(backend: Any) -> list[dict[str, Any]]:
        return schedule_rows(await backend.list_schedules(), await backend.clock())

    rows = run_async(_with_backend(url, schema, read))
    if as_json:
        echo_json(rows)
        return
    if not rows:
        click.echo("no schedules (a worker registers its schedules when it starts)")
        return
    table = Table("name", "expression", "tz", "next slot", "last fired", "paused")
    for row in rows:
        cells = [row["name"], row["expression"], row["tz"], row["next_slot"] or "-"]
        cells += [row["last_fired"] or "never", "yes" if row["paused"] else "no"]
        table.add_row(*(Text(printable(cell)) for cell in cells))
    wide_console().print(table)


def _set_paused(database_url: str | None, schema: str, name: str, paused: bool) -> None:
    admin = admin_for(database_url, schema)  # audited: the dashboard's audit log shows it
    if not run_async(admin.set_schedule_paused(name, paused)):
        fail(f"no schedule named {name!r}", EXIT_NOT_FOUND)
    click.echo(f"schedule {printable(name)} {'paused' if paused else 'resumed'}")


@schedules.command("pause")
@DATABASE_URL
@SCHEMA
@click.argument("name")
def pause_command(database_url: str | None, schema: str, name: str) -> None:
    """Pause schedule NAME for every worker (its slots are skipped until resumed)."""
    _set_paused(database_url, schema, name, True)


@schedules.command("resume")
@DATABASE_URL
@SCHEMA
@click.argument("name")
def resume_command(database_url: str | None, schema: str, name: str) -> None:
    """Resume schedule NAME for every worker."""
    _set_paused(database_url, schema, name, False)
