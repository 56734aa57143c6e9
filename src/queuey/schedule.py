"""Periodic schedules: ``Schedule`` (a job fired on a cron expression or every so often),
``Timing`` (when its slots fall) and ``ScheduleRecord`` (its state as the backend keeps it).

```python
Schedule(cron="0 3 * * *", job=NightlyReport(kind="daily"), tz="Europe/Paris", name="nightly")
Schedule(every="10s", job=Refresh(), name="refresh")
```

A slot is an instant (UTC). Cron slots are read in the schedule's IANA time zone with cronsim,
which follows Debian's cron across daylight saving: a slot in a skipped hour fires once, at the
next valid time; a slot in a repeated hour fires once (an expression whose hour is a wildcard
fires in both passes, as the clock does run through them). ``every`` slots are aligned to the
epoch, so every worker computes the same ones. A cron expression has the five standard fields
(minute, hour, day of month, month, day of week) or is one of the macros ``@yearly``
(``@annually``), ``@monthly``, ``@weekly``, ``@daily`` (``@midnight``) and ``@hourly``; six
fields are refused (some crons read the sixth as seconds, others as a year), and so is
``@reboot``. Each worker that knows a schedule fires each due slot with the unique key
(schedule name, slot): however many workers run, a slot fires once.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, cast, get_args
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from cronsim import CronSim, CronSimError

from queuey._validation import Site, check_bool, check_int, check_str
from queuey.durations import Duration, parse_duration
from queuey.jobs import Job

__all__ = ["CatchUp", "Periodic", "Schedule", "ScheduleRecord", "Timing", "slot_key"]

MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
"""The cron macros accepted, and the five fields each stands for."""


def cron_fields(expression: str) -> str:
    """The five-field form of a checked cron expression (a macro expanded)."""
    return MACROS.get(expression.lower(), expression)


def _check_cron(expression: str) -> str | None:
    """Why ``expression`` is not a cron expression queuey reads, or ``None`` when it is."""
    if expression.startswith("@"):
        if expression.lower() in MACROS:
            return None
        return f"not a known macro (known: {', '.join(MACROS)})"
    count = len(expression.split())
    if count != 5:
        return (
            f"has {count} fields; give the five standard fields (minute hour day-of-month "
            "month day-of-week) or a macro such as @daily; for slots seconds apart use every="
        )
    try:
        CronSim(expression, datetime.now(UTC))
    except (CronSimError, ValueError) as exc:
        return str(exc)
    return None


CatchUp = Literal["none", "latest", "all"]
"""Which missed slots a worker fires when it finds several due at once (after a downtime)."""

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICRO = timedelta(microseconds=1)
_EVERY_PREFIX = "every "


def slot_key(name: str, slot: datetime) -> str:
    """The unique key of slot ``slot`` of schedule ``name`` (the slot as UTC ISO text)."""
    return f"schedule:{name}:{slot.astimezone(UTC).isoformat()}"


@dataclass(frozen=True)
class Timing:
    """When a schedule's slots fall: a cron expression in a time zone, or a fixed interval.

    Build with ``Timing.of(cron=..., every=..., tz=..., site=...)`` (checked) or
    ``Timing.parse(expression, tz)``.
    """

    cron: str | None
    every: timedelta | None
    tz: str

    @classmethod
    def of(
        cls, *, cron: object = None, every: object = None, tz: object = "UTC", site: Site
    ) -> Timing:
        """A checked timing.

        Raises:
            ConfigError: neither or both of ``cron`` and ``every``, an invalid cron expression,
                an unknown time zone or a bad interval; the message names ``site``.
        """
        zone = check_str(tz, "tz", non_empty=True, site=site)
        try:
            ZoneInfo(zone)
        except (ZoneInfoNotFoundError, ValueError):
            raise site.error("tz", f"unknown time zone {zone!r}") from None
        if (cron is None) == (every is None):
            raise site.about("give exactly one of cron=... and every=...")
        if every is not None:
            with site.context():
                return cls(None, parse_duration(cast(Duration, every), "every"), zone)
        expression = " ".join(check_str(cron, "cron", non_empty=True, site=site).split())
        problem = _check_cron(expression)
        if problem is not None:
            raise site.error("cron", f"invalid cron expression {expression!r}: {problem}")
        return cls(expression, None, zone)

    @classmethod
    def parse(cls, expression: str, tz: str) -> Timing:
        """The timing ``expression()`` described (as the backend stores it).

        Raises:
            ConfigError: the expression or the zone is not valid.
        """
        if expression.startswith(_EVERY_PREFIX):
            return cls.of(every=expression.removeprefix(_EVERY_PREFIX), tz=tz, site=Site())
        return cls.of(cron=expression, tz=tz, site=Site())

    def expression(self) -> str:
        """The cron expression, or ``"every <seconds>s"``."""
        if self.every is not None:
            return f"{_EVERY_PREFIX}{self.every.total_seconds():g}s"
        return self.cron or ""

    def next_after(self, moment: datetime) -> datetime:
        """The first slot strictly after ``moment`` (UTC)."""
        if self.every is not None:
            step = self.every // _MICRO
            index = (moment - EPOCH) // _MICRO // step + 1
            return EPOCH + _MICRO * (index * step)
        start = moment.astimezone(ZoneInfo(self.tz))
        for slot in CronSim(cron_fields(self.cron or ""), start):
            # From inside a repeated hour cronsim may answer with that hour's first pass.
            if slot.astimezone(UTC) > moment:
                return slot.astimezone(UTC)
        raise AssertionError("unreachable: a cron expression has a next slot")

    def slots(self, after: datetime | None, until: datetime, limit: int) -> list[datetime]:
        """The newest ``limit`` slots in ``(after, until]`` (UTC, oldest first); ``after``
        ``None`` means no lower bound."""
        found: list[datetime] = []
        for slot in self._backwards(until):
            if len(found) >= limit or (after is not None and slot <= after):
                break
            if slot <= until and (not found or slot < found[-1]):  # strictly older each time
                found.append(slot)
        return found[::-1]

    def _backwards(self, until: datetime) -> Any:
        """Slots at or before ``until``, newest first (an endless iterator)."""
        if self.every is not None:
            step = self.every // _MICRO
            index = (until - EPOCH) // _MICRO // step
            while True:
                yield EPOCH + _MICRO * (index * step)
                index -= 1
        start = (until + _MICRO).astimezone(ZoneInfo(self.tz))
        for slot in CronSim(cron_fields(self.cron or ""), start, reverse=True):
            yield slot.astimezone(UTC)


@dataclass(frozen=True)
class ScheduleRecord:
    """A schedule as the backend keeps it (shared by every worker and ``queuey schedules``).

    Attributes:
        name: the schedule's name.
        expression: its cron expression, or ``"every <seconds>s"``.
        tz: its IANA time zone.
        last_slot: the newest slot fired (UTC), ``None`` before the first.
        last_fired_at: when that slot was recorded (backend clock), ``None`` before the first.
        last_job_id: the job (or first message) that slot enqueued.
        paused: paused schedules fire nothing until resumed.
        declared_at: when this expression and zone replaced the schedule's earlier ones
            (backend clock: when a worker first registered the change); ``None`` while it keeps
            the ones it was first registered with.
    """

    name: str
    expression: str
    tz: str
    last_slot: datetime | None = None
    last_fired_at: datetime | None = None
    last_job_id: str | None = None
    paused: bool = False
    declared_at: datetime | None = None

    def declares(self, timing: Timing) -> bool:
        """Whether this record's expression and zone are ``timing``'s."""
        return (self.expression, self.tz) == (timing.expression(), timing.tz)


class Periodic:
    """What every periodic schedule has: a name, a timing and the catch-up rules (a typed job's
    ``Schedule``; a topic's schedule in ``[queues.schedule]``).

    Args:
        name: the schedule's name, unique among schedules (its slots' unique keys hold it).
        cron: a five-field cron expression, read in ``tz``.
        every: or a fixed interval (``"10s"``, ``timedelta``, seconds), slots aligned to the
            epoch on the database clock.
        tz: the IANA time zone of ``cron`` (default ``"UTC"``).
        catch_up: which slots a worker fires when it finds several due at once (all workers
            were down, or late): ``"latest"`` (default: the newest only), ``"none"`` (only
            the newest, and only if it is at most ``grace`` late) or ``"all"`` (up to
            ``catch_up_limit`` of the newest, oldest first).
        catch_up_limit: the most missed slots ``"all"`` fires (default 100).
        skip_if_running: skip a slot while the previous firing is still pending or running.
        grace: how late a slot may be found and still fire under ``catch_up="none"``
            (duration; default 60 s).
        site: where the options come from, for error messages (default: ``Schedule 'name'``).

    Raises:
        ConfigError: a bad option, an invalid cron expression or an unknown time zone; the
            message names the schedule.
    """

    def __init__(
        self,
        *,
        name: str,
        cron: str | None = None,
        every: Duration | None = None,
        tz: str = "UTC",
        catch_up: CatchUp = "latest",
        catch_up_limit: int = 100,
        skip_if_running: bool = False,
        grace: Duration = "60s",
        site: Site | None = None,
    ) -> None:
        check_str(name, "name", non_empty=True, site=site or Site.declaration("Schedule"))
        site = site or Site.declaration(f"Schedule {name!r}")
        self.name = name
        self.timing = Timing.of(cron=cron, every=every, tz=tz, site=site)
        if catch_up not in get_args(CatchUp):
            raise site.error("catch_up", f"expected 'none', 'latest' or 'all', got {catch_up!r}")
        self.catch_up: CatchUp = catch_up
        self.catch_up_limit = check_int(catch_up_limit, "catch_up_limit", low=1, site=site)
        self.skip_if_running = check_bool(skip_if_running, "skip_if_running", site=site)
        with site.context():
            self.grace = parse_duration(grace, "grace")

    def __repr__(self) -> str:
        kind = type(self).__name__
        return f"{kind}(name={self.name!r}, {self.timing.expression()!r}, tz={self.timing.tz!r})"

    def record(self) -> ScheduleRecord:
        """The record a worker registers for this schedule."""
        return ScheduleRecord(self.name, self.timing.expression(), self.timing.tz)


class Schedule(Periodic):
    """A job enqueued periodically by every worker given it (``Worker(..., schedules=[...])``).

    Args:
        name: the schedule's name, unique among schedules.
        job: the job instance to enqueue at each slot (a ``Job`` of the worker's queue set).
        cron: a five-field cron expression, read in ``tz``; give ``cron`` or ``every``.
        every: or a fixed interval (``"10s"``, ``timedelta``, seconds), slots aligned to the
            epoch on the database clock.
        tz: the IANA time zone of ``cron`` (default ``"UTC"``).
        catch_up: which slots a worker fires when it finds several due at once: ``"latest"``
            (default: the newest only), ``"none"`` (the newest, only if it is at most ``grace``
            late) or ``"all"`` (up to ``catch_up_limit`` of the newest, oldest first).
        catch_up_limit: the most missed slots ``"all"`` fires (default 100).
        skip_if_running: skip a slot while the previous firing is still pending or running.
        grace: how late a slot may be found and still fire under ``catch_up="none"``
            (duration; default 60 s).

    Raises:
        ConfigError: a bad option (neither or both of ``cron`` and ``every``, a zero
            interval, a ``job`` that is not a ``Job`` instance), an invalid cron expression or
            an unknown time zone; the message names the schedule.
    """

    def __init__(
        self,
        *,
        name: str,
        job: Job[Any, Any],
        cron: str | None = None,
        every: Duration | None = None,
        tz: str = "UTC",
        catch_up: CatchUp = "latest",
        catch_up_limit: int = 100,
        skip_if_running: bool = False,
        grace: Duration = "60s",
    ) -> None:
        super().__init__(
            name=name,
            cron=cron,
            every=every,
            tz=tz,
            catch_up=catch_up,
            catch_up_limit=catch_up_limit,
            skip_if_running=skip_if_running,
            grace=grace,
        )
        if not isinstance(job, Job):
            site = Site.declaration(f"Schedule {name!r}")
            raise site.error("job", f"expected a Job instance, got {type(job).__name__}")
        self.job = job
