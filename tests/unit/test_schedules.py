"""Periodic schedules on the memory backend under virtual time: a day of slots in no wall time,
both daylight saving transitions, catch-up, skip_if_running, pause, several workers."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from queuey import (
    ConfigError,
    Job,
    JobContext,
    MemoryBackend,
    Queue,
    QueueSet,
    Schedule,
    Worker,
)
from queuey._runtime.scheduler import job_entries
from queuey.schedule import CatchUp, ScheduleRecord, Timing

PARIS = ZoneInfo("Europe/Paris")


class Cron(QueueSet, prefix="cron"):
    reports = Queue(prefetch=8)


class Report(Job[Cron], queue=Cron.reports):
    kind: str = "daily"
    hold_secs: float = 0.0


class Elsewhere(QueueSet, prefix="elsewhere"):
    q = Queue()


class Stray(Job[Elsewhere], queue=Elsewhere.q):
    pass


async def run_for(
    backend: MemoryBackend, schedules: list[Schedule], seconds: float, workers: int = 1
) -> list[datetime]:
    """Run ``workers`` workers with ``schedules`` for ``seconds`` of loop time; the backend
    clock at each job's start, in order."""
    started: list[datetime] = []
    pool = [Worker(Cron, backend, schedules=schedules) for _ in range(workers)]
    for worker in pool:

        @worker.handler(Report)
        async def handle(job: Report, ctx: JobContext) -> None:
            started.append(await backend.clock())
            await asyncio.sleep(job.hold_secs)

    tasks = [asyncio.create_task(worker.run()) for worker in pool]
    await asyncio.sleep(seconds)
    for worker in pool:
        worker.shutdown()
    await asyncio.gather(*tasks)
    return started


def minute(moment: datetime, zone: ZoneInfo = PARIS) -> str:
    return moment.astimezone(zone).strftime("%Y-%m-%d %H:%M %Z")


@pytest.mark.looptime
async def test_a_day_of_every_five_minutes_fires_288_times_in_no_wall_time() -> None:
    backend = MemoryBackend(start=datetime(2024, 1, 10, 0, 0, 30, tzinfo=UTC))
    schedule = Schedule(cron="*/5 * * * *", job=Report(), name="five")
    wall, cpu = time.monotonic(), time.process_time()
    started = await run_for(backend, [schedule], 24 * 3600)
    # About 0.3 s on an idle machine; CPU time is what this process spent, whatever else runs.
    assert time.process_time() - cpu < 1.0 and time.monotonic() - wall < 5.0
    assert len(started) == 288
    assert {moment.minute % 5 for moment in started} == {0}
    assert len({moment.replace(second=0, microsecond=0) for moment in started}) == 288


@pytest.mark.looptime
async def test_a_slot_in_the_skipped_hour_fires_once_at_the_next_valid_time() -> None:
    backend = MemoryBackend(start=datetime(2024, 3, 30, 12, 0, tzinfo=PARIS))
    schedule = Schedule(cron="30 2 * * *", job=Report(), tz="Europe/Paris", name="night")
    started = await run_for(backend, [schedule], 48 * 3600)
    assert [minute(m) for m in started] == ["2024-03-31 03:00 CEST", "2024-04-01 02:30 CEST"]


@pytest.mark.looptime
async def test_a_slot_in_the_repeated_hour_fires_once() -> None:
    backend = MemoryBackend(start=datetime(2024, 10, 26, 12, 0, tzinfo=PARIS))
    schedule = Schedule(cron="30 2 * * *", job=Report(), tz="Europe/Paris", name="night")
    started = await run_for(backend, [schedule], 48 * 3600)
    assert [minute(m) for m in started] == ["2024-10-27 02:30 CEST", "2024-10-28 02:30 CET"]


async def missed(catch_up: CatchUp, limit: int = 100) -> list[datetime]:
    """Every worker was down for an hour of a ten-minute schedule; what does one fire at once?"""
    start = datetime(2024, 5, 1, 12, 5, tzinfo=UTC)
    backend = MemoryBackend(start=start)
    schedule = Schedule(
        every="10m",
        job=Report(),
        name="ten",
        catch_up=catch_up,
        catch_up_limit=limit,
    )
    await backend.register_schedules([schedule.record()])
    await backend.record_fired("ten", start - timedelta(minutes=65), "previous")
    return await run_for(backend, [schedule], 60)


@pytest.mark.looptime
async def test_catch_up_fires_the_latest_missed_slot_only_by_default() -> None:
    assert len(await missed("latest")) == 1


@pytest.mark.looptime
async def test_catch_up_all_fires_the_missed_slots_up_to_the_limit() -> None:
    assert len(await missed("all")) == 6
    assert len(await missed("all", limit=2)) == 2


@pytest.mark.looptime
async def test_catch_up_none_fires_no_slot_older_than_the_grace() -> None:
    assert await missed("none") == []


@pytest.mark.looptime
async def test_skip_if_running_skips_slots_while_the_previous_run_lasts() -> None:
    backend = MemoryBackend(start=datetime(2024, 5, 1, 12, 0, 10, tzinfo=UTC))
    schedule = Schedule(every="1m", job=Report(hold_secs=150), name="long", skip_if_running=True)
    started = await run_for(backend, [schedule], 295)
    assert [m.strftime("%H:%M") for m in started] == ["12:01", "12:04"]
    overlapping = Schedule(every="1m", job=Report(hold_secs=150), name="overlap")
    backend = MemoryBackend(start=datetime(2024, 5, 1, 12, 0, 10, tzinfo=UTC))
    assert len(await run_for(backend, [overlapping], 295)) == 5


@pytest.mark.looptime
async def test_a_paused_schedule_fires_nothing_until_resumed() -> None:
    backend = MemoryBackend(start=datetime(2024, 5, 1, 12, 0, 10, tzinfo=UTC))
    schedule = Schedule(every="1m", job=Report(), name="pausable")
    worker = Worker(Cron, backend, schedules=[schedule])
    runs: list[int] = []

    @worker.handler(Report)
    async def handle(job: Report, ctx: JobContext) -> None:
        runs.append(1)

    task = asyncio.create_task(worker.run())
    await asyncio.sleep(125)  # 12:01, 12:02
    assert len(runs) == 2
    assert await backend.set_schedule_paused("pausable", True)
    await asyncio.sleep(180)  # 12:03, 12:04, 12:05 skipped
    assert len(runs) == 2
    assert await backend.set_schedule_paused("pausable", False)
    await asyncio.sleep(60)  # 12:06
    worker.shutdown()
    await task
    assert len(runs) == 3
    (record,) = await backend.list_schedules()
    assert record.last_slot == datetime(2024, 5, 1, 12, 6, tzinfo=UTC) and not record.paused
    assert not await backend.set_schedule_paused("nope", True)


@pytest.mark.looptime
async def test_several_workers_fire_each_slot_once() -> None:
    backend = MemoryBackend(start=datetime(2024, 5, 1, 12, 0, 3, tzinfo=UTC))
    schedule = Schedule(every="10s", job=Report(), name="shared")
    started = await run_for(backend, [schedule], 600, workers=3)
    assert len(started) == 60


def test_bad_schedules_are_config_errors_naming_the_schedule() -> None:
    with pytest.raises(ConfigError, match=r"Schedule 'bad': cron: invalid cron expression"):
        Schedule(cron="61 * * * *", job=Report(), name="bad")
    with pytest.raises(ConfigError, match=r"Schedule 'zone': tz: unknown time zone 'Mars/Olympus'"):
        Schedule(cron="0 3 * * *", job=Report(), name="zone", tz="Mars/Olympus")
    with pytest.raises(ConfigError, match=r"Schedule 'both': give exactly one of cron"):
        Schedule(cron="0 3 * * *", every="1h", job=Report(), name="both")
    with pytest.raises(ConfigError, match=r"Schedule 'n': every"):
        Schedule(every="0s", job=Report(), name="n")
    with pytest.raises(ConfigError, match="catch_up"):
        Schedule(every="1s", job=Report(), name="c", catch_up="some")  # type: ignore[arg-type]


def test_a_worker_refuses_foreign_jobs_duplicate_names_and_backends_without_schedules() -> None:
    backend = MemoryBackend()
    with pytest.raises(ConfigError, match="is not a job of Cron"):
        Worker(Cron, backend, schedules=[Schedule(every="1s", job=Stray(), name="s")])
    twice = [Schedule(every="1s", job=Report(), name="s")] * 2
    with pytest.raises(ConfigError, match="two schedules are named 's'"):
        Worker(Cron, backend, schedules=twice)
    with pytest.raises(ConfigError, match="schedules need PostgreSQL or memory"):
        job_entries(twice[:1], Cron, object())  # type: ignore[arg-type]


def test_timing_reads_back_what_it_stores() -> None:
    every = Timing.parse("every 10s", "UTC")
    assert every.every == timedelta(seconds=10) and every.expression() == "every 10s"
    cron = Timing.parse("0  3 * * *", "Europe/Paris")
    assert cron.expression() == "0 3 * * *"
    moment = datetime(2024, 1, 1, 3, 0, tzinfo=PARIS)
    assert cron.next_after(moment - timedelta(seconds=1)) == moment
    assert cron.slots(None, moment, 2) == [moment - timedelta(days=1), moment]
    record = Schedule(every="10s", job=Report(), name="r").record()
    assert record == ScheduleRecord("r", "every 10s", "UTC")


def test_the_sync_producer_refuses_unique_jobs_where_duplicates_cannot_be_refused() -> None:
    from queuey import Unique
    from queuey.sync import Producer as SyncProducer

    class Keyed(Job[Cron], queue=Cron.reports, unique=Unique(by=("n",))):
        n: int

    producer = SyncProducer.undeclared(Cron, object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"unique jobs need PostgreSQL or memory; object has"):
        producer.enqueue(Keyed(n=1))


@pytest.mark.parametrize(
    ("macro", "after", "slot"),
    [
        ("@yearly", datetime(2024, 5, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)),
        ("@annually", datetime(2024, 5, 1, tzinfo=UTC), datetime(2025, 1, 1, tzinfo=UTC)),
        ("@monthly", datetime(2024, 5, 1, 1, tzinfo=UTC), datetime(2024, 6, 1, tzinfo=UTC)),
        ("@weekly", datetime(2024, 5, 1, tzinfo=UTC), datetime(2024, 5, 5, tzinfo=UTC)),
        ("@daily", datetime(2024, 5, 1, 0, 1, tzinfo=UTC), datetime(2024, 5, 2, tzinfo=UTC)),
        ("@midnight", datetime(2024, 5, 1, 0, 1, tzinfo=UTC), datetime(2024, 5, 2, tzinfo=UTC)),
        ("@hourly", datetime(2024, 5, 1, 0, 1, tzinfo=UTC), datetime(2024, 5, 1, 1, tzinfo=UTC)),
        ("@Daily", datetime(2024, 5, 1, 0, 1, tzinfo=UTC), datetime(2024, 5, 2, tzinfo=UTC)),
    ],
)
def test_the_common_cron_macros_are_accepted(macro: str, after: datetime, slot: datetime) -> None:
    schedule = Schedule(cron=macro, job=Report(), name="m")
    timing = Timing.parse(schedule.record().expression, "UTC")
    assert timing.expression() == macro
    assert timing.next_after(after) == slot
    assert timing.slots(None, slot, 1) == [slot]


@pytest.mark.parametrize(
    ("cron", "message"),
    [
        ("0 0 * * * *", "has 6 fields; give the five standard fields"),
        ("*/5 * * * * 2024", "has 6 fields"),
        ("0 * * *", "has 4 fields"),
        ("@reboot", "not a known macro (known: @yearly, @annually"),
        ("@every 5m", "not a known macro"),
    ],
)
def test_a_cron_that_is_not_five_fields_or_a_macro_is_refused(cron: str, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Schedule(cron=cron, job=Report(), name="odd")
    assert f"Schedule 'odd': cron: invalid cron expression {cron!r}: {message}" in str(caught.value)
