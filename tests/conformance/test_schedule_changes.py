"""A changed schedule (expression or time zone) takes effect from its next slot, on every
backend that keeps schedules (PostgreSQL, memory): a missed slot is a slot of the schedule as it
was declared when the slot fell due, never one the earlier declaration did not have."""

from __future__ import annotations

import asyncio
import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest

from queuey import Job, JobContext, Queue, QueueSet, Schedule, Worker
from queuey.backends.base import Backend, ScheduleBackend
from queuey.schedule import ScheduleRecord, Timing


def kit() -> tuple[type[QueueSet], type[Any]]:
    prefix = f"s{uuid.uuid4().hex[:8]}"

    class Queues(QueueSet, prefix=prefix):
        reports = Queue()

    class Report(Job[Queues], queue=Queues.reports, name=f"{prefix}.Report"):
        kind: str = "daily"

    return Queues, Report


def schedules(backend: Backend) -> ScheduleBackend:
    if not isinstance(backend, ScheduleBackend):
        pytest.skip("this backend keeps no schedules")
    return backend


async def run_with(
    backend: Backend,
    options: dict[str, Any],
    seconds: float,
    caplog: pytest.LogCaptureFixture,
) -> tuple[list[datetime], int]:
    """Run a worker with ``Schedule(**options)`` for ``seconds``: the slots it fired, and its
    runs."""
    queues, Report = kit()
    worker = Worker(queues, backend, schedules=[Schedule(job=Report(), **options)])
    runs: list[str] = []

    @worker.handler(Report)
    async def handle(job: Any, ctx: JobContext) -> None:
        runs.append(ctx.job_id)

    caplog.clear()
    with caplog.at_level(logging.INFO, logger="queuey.schedule"):
        task = asyncio.create_task(worker.run())
        await asyncio.sleep(seconds)
        worker.shutdown()
        await task
    fired = [
        datetime.fromisoformat(r.getMessage().rsplit(" ", 1)[1])
        for r in caplog.records
        if r.name == "queuey.schedule" and r.msg == "schedule %s fired slot %s"
    ]
    return fired, len(runs)


async def fired_before(
    store: ScheduleBackend, name: str, expression: str, tz: str, slot: datetime
) -> None:
    """Schedule ``name`` was declared ``expression`` in ``tz`` and last fired ``slot``."""
    await store.register_schedules([ScheduleRecord(name, expression, tz)])
    await store.record_fired(name, slot, str(uuid.uuid4()))


def latest_slot(expression: str, tz: str, until: datetime) -> datetime:
    (slot,) = Timing.parse(expression, tz).slots(None, until, 1)
    return slot


async def test_a_changed_expression_fires_no_slot_the_old_one_did_not_have(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    store = schedules(backend)
    now = await store.clock()
    # Hourly at the minute two minutes ago, fired then; now hourly at the minute one minute ago:
    # that slot lies after the last one fired, but the old schedule never had it.
    old = f"{(now - timedelta(minutes=2)).minute} * * * *"
    new = f"{(now - timedelta(minutes=1)).minute} * * * *"
    last = latest_slot(old, "UTC", now)
    name = f"rep-{uuid.uuid4().hex[:6]}"
    await fired_before(store, name, old, "UTC", last)
    schedule = dict(cron=new, name=name)
    fired, runs = await run_with(backend, schedule, 1.5, caplog)
    assert (fired, runs) == ([], 0)
    (record,) = await store.list_schedules([name])
    assert (record.expression, record.last_slot) == (new, last)
    assert record.declared_at is not None and record.declared_at >= now


async def test_a_changed_time_zone_fires_no_slot_the_old_one_did_not_have(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    store = schedules(backend)
    now = await store.clock()
    # Hourly at minute M in UTC, last fired 40 minutes ago; the same expression in Kolkata
    # (UTC+05:30) falls 10 minutes ago, after that slot: the UTC schedule never had it.
    expression = f"{(now - timedelta(minutes=40)).minute} * * * *"
    last = latest_slot(expression, "UTC", now)
    assert latest_slot(expression, "Asia/Kolkata", now) > last
    name = f"tz-{uuid.uuid4().hex[:6]}"
    await fired_before(store, name, expression, "UTC", last)
    schedule = dict(cron=expression, tz="Asia/Kolkata", name=name)
    fired, runs = await run_with(backend, schedule, 1.5, caplog)
    assert (fired, runs) == ([], 0)
    (record,) = await store.list_schedules([name])
    assert (record.tz, record.last_slot) == ("Asia/Kolkata", last)


async def test_a_changed_schedule_fires_from_its_next_slot(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    store = schedules(backend)
    now = await store.clock()
    name = f"every-{uuid.uuid4().hex[:6]}"
    await fired_before(store, name, "every 3600s", "UTC", latest_slot("every 3600s", "UTC", now))
    schedule = dict(every="1s", name=name)
    fired, runs = await run_with(backend, schedule, 3.5, caplog)
    assert fired and all(slot > now for slot in fired), (now, fired)
    assert runs >= 1


async def test_a_slot_the_old_schedule_missed_still_fires_once(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    store = schedules(backend)
    now = await store.clock()
    name = f"missed-{uuid.uuid4().hex[:6]}"
    missed = latest_slot("every 3600s", "UTC", now)
    await fired_before(store, name, "every 3600s", "UTC", missed - timedelta(hours=1))
    schedule = dict(cron="*/5 * * * *", name=name)
    fired, runs = await run_with(backend, schedule, 1.5, caplog)
    # The hourly slot fell due under the hourly declaration: it was missed, and fires (latest);
    # no five-minute slot before the change does.
    assert (fired, runs) == ([missed], 1)


async def test_a_worker_whose_declaration_was_replaced_fires_nothing_of_it(
    backend: Backend, caplog: pytest.LogCaptureFixture
) -> None:
    store = schedules(backend)
    name = f"old-{uuid.uuid4().hex[:6]}"
    schedule = dict(every="1s", name=name)

    async def replace_it() -> None:
        await asyncio.sleep(1.5)
        await store.register_schedules([ScheduleRecord(name, "0 3 * * *", "UTC")])

    replacing = asyncio.create_task(replace_it())
    fired, _ = await run_with(backend, schedule, 4.5, caplog)
    await replacing
    (record,) = await store.list_schedules([name])
    assert record.expression == "0 3 * * *" and record.declared_at is not None
    assert fired and all(slot <= record.declared_at for slot in fired), fired
    assert any(
        "another worker declared it 0 3 * * * (UTC)" in r.getMessage() for r in caplog.records
    )
