"""The optional capabilities of a backend, each a Protocol of its own beside the core
``Backend`` contract (re-exported by ``backends.base``, whose docstring says which backend has
which): looking a job up (``JobLookup``), waiting for its end (``ResultBackend``), keeping
unstoppable runs held until close (``RunKeeper``), naming itself to observability
(``Observable``), counting every queue at once (``DepthBackend``), the schedules' shared
state (``ScheduleBackend``), and a delivery whose success commits in the handler's own
database transaction (``TransactionalDelivery``, PostgreSQL only), and a consumer that takes
the worker's handler slots before it claims (``SlotAware``, given the runtime's
``HandlerSlots``). The runtime asks for one with ``isinstance`` (a delivery's, once per run,
by its attribute)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from queuey.backends._records import JobEnd, JobInfo, QueueDepth
from queuey.schedule import ScheduleRecord
from queuey.unique import State

__all__ = [
    "DepthBackend",
    "HandlerSlots",
    "JobLookup",
    "Observable",
    "ResultBackend",
    "RunKeeper",
    "ScheduleBackend",
    "SlotAware",
    "TransactionalDelivery",
]


@runtime_checkable
class JobLookup(Protocol):
    """A backend that can say where a job is by its id (PostgreSQL and memory)."""

    async def job(self, job_id: str) -> JobInfo | None:
        """The job ``job_id`` as the backend knows it now; ``None`` when there is no such job
        (never enqueued here, or a done job already deleted by retention).

        Raises:
            BackendError: the backend could not be asked.
        """
        ...


@runtime_checkable
class ResultBackend(Protocol):
    """A backend that stores results and lets callers wait for a job to end (PostgreSQL and
    memory)."""

    async def wait_end(self, job_id: str, timeout: float | None) -> JobEnd | None:
        """Wait until job ``job_id`` is done, failed or cancelled (at once when it is already);
        ``None`` when ``timeout`` seconds passed first (the job is left alone).

        Raises:
            UnknownJobError: there is no such job (never enqueued, or deleted by retention).
            ConfigError: (PostgreSQL) ``job_id`` is not a UUID.
            BackendError: the backend could not be asked.
        """
        ...


@runtime_checkable
class RunKeeper(Protocol):
    """A backend whose ``close`` waits for the runs of this process it is given: runs that
    could not be stopped (a plain handler's thread) and whose jobs it still holds, so that
    closing it never hands such a job to another worker while it runs here."""

    def keep_open_for(self, runs: Iterable[asyncio.Future[Any]]) -> None:
        """Make ``close`` wait for ``runs`` to end first (keeping their jobs held meanwhile)."""
        ...


@runtime_checkable
class Observable(Protocol):
    """What a backend tells observability about itself.

    Attributes:
        messaging_system: the OpenTelemetry ``messaging.system`` of its spans
            (``"postgresql"``, ``"rabbitmq"``, ``"memory"``).
        connected: whether it reaches its server now, as far as it knows without asking
            (``False`` during an outage it noticed, and once closed).
    """

    messaging_system: str

    @property
    def connected(self) -> bool:
        """Whether the server is reachable, as last seen."""
        ...


@runtime_checkable
class DepthBackend(Protocol):
    """A backend that counts every queue's messages at once (PostgreSQL, memory)."""

    async def queue_depths(self) -> list[QueueDepth]:
        """Every queue with live messages, ordered by kind then name; one round trip.

        Raises:
            BackendError: the backend could not be asked.
        """
        ...


@runtime_checkable
class ScheduleBackend(Protocol):
    """The shared state of periodic schedules, and the clock their slots are read on."""

    async def clock(self) -> datetime:
        """The backend's current time, timezone-aware (the database's ``now()``)."""
        ...

    async def job_state(self, job_id: str) -> State | None:
        """The state of job ``job_id``; ``None`` when there is no such job (any more)."""
        ...

    async def register_schedules(self, records: Sequence[ScheduleRecord]) -> None:
        """Create the schedules that do not exist yet and update their expression and time
        zone; their last slot and paused flag are kept."""
        ...

    async def list_schedules(self, names: Sequence[str] | None = None) -> list[ScheduleRecord]:
        """The known schedules (those of ``names`` only, when given), by name."""
        ...

    async def record_fired(self, name: str, slot: datetime, job_id: str) -> None:
        """Slot ``slot`` of schedule ``name`` was fired (or found fired) as job ``job_id``;
        the schedule's last slot only moves forward."""
        ...

    async def set_schedule_paused(self, name: str, paused: bool) -> bool:
        """Pause or resume schedule ``name``; ``False`` when no such schedule is known."""
        ...


@runtime_checkable
class TransactionalDelivery(Protocol):
    """A ``Delivery`` whose success can commit inside the handler's own database transaction
    (PostgreSQL). A delivery without it refuses ``ctx.transaction()``."""

    def transaction(self) -> AbstractAsyncContextManager[Any]:
        """A database transaction (yielding the driver's connection) in which the handler's
        writes and this run's success commit together, fenced like every settle; the later
        ``ack`` then only frees the delivery.

        Raises:
            BackendError: the connection, the commit or a statement of the body failed.
        """
        ...


class HandlerSlots(Protocol):
    """The worker's handler slots, one per delivery being handled, shared by its consumers
    (the runtime's ``Slots``)."""

    @property
    def free(self) -> int:
        """Slots nobody holds."""
        ...

    def take(self, wanted: int) -> int:
        """Hold up to ``wanted`` free slots now; returns how many."""
        ...

    def give(self, count: int = 1) -> None:
        """Free ``count`` slots."""
        ...

    def watch(self, wake: Callable[[], None]) -> Callable[[], None]:
        """Call ``wake()`` whenever slots are freed; returns what stops it."""
        ...


@runtime_checkable
class SlotAware(Protocol):
    """A consumer that takes its slots itself, before it claims: each delivery it hands out
    already holds one slot of the ``HandlerSlots`` it was given (PostgreSQL, memory)."""

    def share_slots(self, slots: HandlerSlots) -> None:
        """Claim only for free ``slots`` from now on, holding one per delivery handed out."""
        ...
