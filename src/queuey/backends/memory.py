"""``MemoryBackend``: an in-process backend for tests and the demo (seed ``001``,
SEEDS-DIGEST §2.10).

Delays and holds run on the event loop's clock (``loop.call_later``), so a virtual-time loop
(looptime) lets minutes of backoff pass in no wall time. Ordering rule: an envelope goes behind
every pending envelope of equal or higher priority and ahead of the rest. A copy
(``copy.copy(backend)``) shares the state.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from queuey.backends.base import Delivery
from queuey.envelope import Envelope, Kind
from queuey.errors import BackendError, ShutDownError
from queuey.queues import QueueConfig

__all__ = ["MemoryBackend"]


@dataclass
class _Pending:
    envelope: Envelope
    expires_at: float | None


@dataclass
class _QueueState:
    config: QueueConfig
    pending: list[_Pending] = field(default_factory=list)
    held: int = 0
    delayed: int = 0
    acked: list[Envelope] = field(default_factory=list)
    dead: list[tuple[Envelope, str]] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)


class _State:
    def __init__(self) -> None:
        self.queues: dict[tuple[Kind, str], _QueueState] = {}
        self.timers: set[asyncio.TimerHandle] = set()
        self.in_flight = 0
        self.closed = False
        self.activity = asyncio.Event()


class MemoryBackend:
    """In-memory transport honouring delays through the event loop's clock.

    Inspection helpers (synchronous): ``pending(q)``, ``acked(q)``, ``deferred(q)``,
    ``delayed(q)``, ``dead_letters(q)``, ``queue_names()``, ``queue_config(q)``, ``is_idle()``,
    ``is_closed()``. Topics (``kind="topic"``) live beside typed queues of the same name
    without colliding; the helpers take ``kind`` for them.
    """

    supports_transactions = False

    def __init__(self, *, _state: _State | None = None) -> None:
        self._state = _state or _State()

    def __copy__(self) -> MemoryBackend:
        return MemoryBackend(_state=self._state)

    def _queue(self, name: str, kind: Kind = "job") -> _QueueState:
        state = self._state.queues.get((kind, name))
        if state is None:
            state = self._state.queues[(kind, name)] = _QueueState(QueueConfig(name, kind=kind))
        return state

    def _check_open(self) -> None:
        if self._state.closed:
            raise ShutDownError("backend is shut down")

    async def declare(self, queues: Sequence[QueueConfig]) -> None:
        """Create the queues; the first config of a name wins."""
        self._check_open()
        for config in queues:
            if (config.kind, config.name) not in self._state.queues:
                self._state.queues[(config.kind, config.name)] = _QueueState(config)

    def _insert(self, envelope: Envelope) -> None:
        if self._state.closed:
            return
        queue = self._queue(envelope.queue, envelope.kind)
        if envelope.kind == "topic" and not envelope.job_type:
            queue.acked.append(envelope)  # nobody subscribes: recorded as handled (seed 000)
            return
        ttl = queue.config.message_ttl
        expires = None if ttl is None else _now() + ttl.total_seconds()
        index = next(
            (i for i, p in enumerate(queue.pending) if p.envelope.priority < envelope.priority),
            len(queue.pending),
        )
        queue.pending.insert(index, _Pending(envelope, expires))
        queue.changed.set()
        self._state.activity.set()

    def _later(self, delay: timedelta, envelope: Envelope, counter: str) -> None:
        queue = self._queue(envelope.queue, envelope.kind)
        setattr(queue, counter, getattr(queue, counter) + 1)

        def release() -> None:
            self._state.timers.discard(handle)
            setattr(queue, counter, getattr(queue, counter) - 1)
            self._insert(envelope)

        handle = asyncio.get_running_loop().call_later(delay.total_seconds(), release)
        self._state.timers.add(handle)

    async def publish(
        self,
        envelopes: Sequence[Envelope],
        delay: timedelta | None = None,
        *,
        connection: object | None = None,
    ) -> None:
        """Make envelopes deliverable after ``delay`` (``None`` or zero = now).

        Raises:
            ShutDownError: the backend is closed.
            BackendError: a ``connection`` was given (no transactions in memory).
        """
        self._check_open()
        if connection is not None:
            raise BackendError("MemoryBackend does not take a database connection")
        for envelope in envelopes:
            if delay and delay > timedelta(0):
                self._later(delay, envelope, "delayed")
            else:
                self._insert(envelope)

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        """Hold ``envelope`` for ``delay`` (counted by ``deferred(q)``), then enqueue it."""
        self._check_open()
        if delay > timedelta(0):
            self._later(delay, envelope, "held")
        else:
            self._insert(envelope)

    def consumer(self, queue: QueueConfig) -> _MemoryConsumer:
        """A consumer honouring ``queue.prefetch`` as unsettled deliveries."""
        return _MemoryConsumer(
            self, self._queue(queue.name, queue.kind), queue.prefetch, queue.job_types
        )

    async def count_pending(self, queue: str, kind: Kind = "job") -> int:
        """Same as ``pending(queue)``."""
        return self.pending(queue, kind)

    async def list_dead(
        self, queue: str, kind: Kind = "job", limit: int = 100
    ) -> list[tuple[Envelope, str]]:
        """Same as ``dead_letters(queue)``, at most ``limit``."""
        return self.dead_letters(queue, kind)[:limit]

    async def close(self) -> None:
        """Close: later publishes raise ``ShutDownError``; timers are cancelled."""
        self._state.closed = True
        for handle in self._state.timers:
            handle.cancel()
        self._state.timers.clear()
        for queue in self._state.queues.values():
            queue.changed.set()

    # -- inspection -------------------------------------------------------------------------

    def pending(self, queue: str, kind: Kind = "job") -> int:
        """Envelopes waiting and not handed out; delayed or held ones are not counted."""
        return len(self._queue(queue, kind).pending)

    def acked(self, queue: str, kind: Kind = "job") -> list[Envelope]:
        """Acknowledged envelopes in ack order (a retry or deferral acks the one it replaces)."""
        return list(self._queue(queue, kind).acked)

    def deferred(self, queue: str, kind: Kind = "job") -> int:
        """Envelopes held by ``defer`` and not yet released."""
        return self._queue(queue, kind).held

    def delayed(self, queue: str, kind: Kind = "job") -> int:
        """Envelopes published or retried with a delay that has not passed."""
        return self._queue(queue, kind).delayed

    def dead_letters(self, queue: str, kind: Kind = "job") -> list[tuple[Envelope, str]]:
        """``(envelope, reason)`` pairs in dead-letter order."""
        return list(self._queue(queue, kind).dead)

    def queue_names(self, kind: Kind = "job") -> list[str]:
        """Every known queue (or topic, with ``kind="topic"``), sorted."""
        return sorted(name for k, name in self._state.queues if k == kind)

    def queue_config(self, queue: str, kind: Kind = "job") -> QueueConfig:
        """The configuration a queue was declared with (defaults if never declared)."""
        return self._queue(queue, kind).config

    def is_idle(self) -> bool:
        """Nothing pending, delayed, held or handed out and unsettled."""
        return self._state.in_flight == 0 and all(
            not q.pending and not q.held and not q.delayed for q in self._state.queues.values()
        )

    async def wait_idle(self) -> None:
        """Return once ``is_idle()`` holds (wakes on every change, never polls)."""
        while not self.is_idle():
            self._state.activity.clear()
            await self._state.activity.wait()

    def is_closed(self) -> bool:
        """Whether ``close`` was called."""
        return self._state.closed


def _now() -> float:
    return asyncio.get_running_loop().time()


class _MemoryDelivery:
    def __init__(self, consumer: _MemoryConsumer, envelope: Envelope) -> None:
        self._consumer = consumer
        self._envelope = envelope
        self._settled = False

    @property
    def envelope(self) -> Envelope:
        return self._envelope

    def _settle(self) -> _QueueState:
        if self._settled:
            raise BackendError(f"delivery of job {self._envelope.job_id} already settled")
        self._settled = True
        self._consumer._release()
        return self._consumer._queue

    async def ack(self) -> None:
        self._settle().acked.append(self._envelope)

    async def retry(self, envelope: Envelope, delay: timedelta, error: str) -> None:
        self._consumer._backend._check_open()
        queue = self._settle()
        await self._consumer._backend.publish([envelope], delay)
        queue.acked.append(self._envelope)

    async def defer(self, envelope: Envelope, delay: timedelta) -> None:
        self._consumer._backend._check_open()
        queue = self._settle()
        await self._consumer._backend.defer(envelope, delay)
        queue.acked.append(self._envelope)

    async def dead_letter(self, reason: str) -> None:
        self._consumer._backend._check_open()
        self._settle().dead.append((self._envelope, reason))

    async def release(self) -> None:
        self._settle()
        self._consumer._backend._insert(self._envelope)


class _MemoryConsumer:
    def __init__(
        self,
        backend: MemoryBackend,
        queue: _QueueState,
        prefetch: int,
        job_types: tuple[str, ...] | None = None,
    ) -> None:
        self._backend = backend
        self._job_types = None if job_types is None else frozenset(job_types)
        self._queue = queue
        self._slots = prefetch
        self._stopped = False
        self._wake = asyncio.Event()

    def _release(self) -> None:
        self._slots += 1
        self._backend._state.in_flight -= 1
        self._backend._state.activity.set()
        self._wake.set()

    def _take(self) -> Envelope | None:
        wanted = self._job_types
        index = 0
        while index < len(self._queue.pending):
            item = self._queue.pending[index]
            if item.expires_at is not None and _now() > item.expires_at:
                del self._queue.pending[index]
                self._queue.dead.append((item.envelope, "expired"))
            elif wanted is None or item.envelope.job_type in wanted:
                del self._queue.pending[index]
                return item.envelope
            else:
                index += 1  # another consumer's job type: leave it
        return None

    async def next(self) -> Delivery | None:
        state = self._backend._state
        while not self._stopped and not state.closed:
            envelope = self._take() if self._slots > 0 else None
            if envelope is not None:
                self._slots -= 1
                state.in_flight += 1
                return _MemoryDelivery(self, envelope)
            await self._wait()
        return None

    async def _wait(self) -> None:
        self._queue.changed.clear()
        self._wake.clear()
        waits = [
            asyncio.ensure_future(self._queue.changed.wait()),
            asyncio.ensure_future(self._wake.wait()),
        ]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()

    async def stop(self) -> None:
        self._stopped = True
        self._wake.set()
