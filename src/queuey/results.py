"""Results of jobs that declare a result type (``Job[Set, Result]``), awaited by the caller.

```python
class Resize(Job[AppQueues, Thumb], queue=AppQueues.images):
    url: str

handle = await producer.enqueue(Resize(url="..."))   # a JobHandle[Thumb] (and the job id)
thumb = await handle.result(timeout="30s")           # a Thumb
thumb = await producer.result(job_id, Thumb)         # from anywhere, with only the id
```

A job that ends failed (dead-lettered) or cancelled raises ``JobFailedError`` (its id, state and
last error); a timeout raises ``ResultTimeoutError`` and leaves the job alone. The result is
read from the backend (``ResultBackend.wait_end``): on PostgreSQL every awaiter of a process
shares one LISTEN connection, and a caller that starts waiting after the job ended reads the
stored result at once (until the done row is deleted by the backend's ``retain``).
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from pydantic import TypeAdapter, ValidationError

from queuey.backends.base import (
    JobEnd,
    JobLookup,
    Progress,
    ResultBackend,
    SyncJobLookup,
    SyncResultBackend,
)
from queuey.durations import Duration, parse_duration
from queuey.errors import JobFailedError, NotSupportedError, ResultError, ResultTimeoutError
from queuey.unique import EnqueueOutcome, EnqueueResult

__all__ = [
    "JobHandle",
    "Progress",
    "SyncJobHandle",
    "await_result",
    "result_backend",
    "wait_result",
]

T = TypeVar("T")


def result_backend(backend: object) -> ResultBackend:
    """``backend`` if it stores results and lets callers wait for them.

    Raises:
        NotSupportedError: it does not (RabbitMQ keeps no per-job state).
    """
    if not isinstance(backend, ResultBackend):
        raise NotSupportedError(
            f"{type(backend).__name__} keeps no per-job state: a job's result cannot be stored "
            "or awaited there; use PostgreSQL or memory, or declare the job without a result "
            "type"
        )
    return backend


async def await_result(
    backend: object, job_id: str, adapter: TypeAdapter[T], timeout: Duration | None
) -> T:
    """The result of job ``job_id`` validated by ``adapter``, once the job is done.

    Raises:
        JobFailedError: the job ended failed or cancelled.
        ResultTimeoutError: it had not ended within ``timeout`` (left alone).
        UnknownJobError: the backend has no such job.
        NotSupportedError: ``backend`` keeps no results.
        ConfigError: ``timeout`` is not a duration, or ``job_id`` not a UUID (PostgreSQL).
        ResultError: the stored result does not read as the type asked for (its ``job_id``
            set).
        BackendError: the backend could not be asked.
    """
    waiting = result_backend(backend)
    seconds = _seconds(timeout)
    return _value(str(job_id), await waiting.wait_end(str(job_id), seconds), adapter, seconds)


def wait_result(
    backend: object, job_id: str, adapter: TypeAdapter[T], timeout: Duration | None
) -> T:
    """As ``await_result``, blocking the calling thread (a ``queuey.sync`` backend).

    Raises:
        as for ``await_result``.
    """
    if not isinstance(backend, SyncResultBackend):
        raise NotSupportedError(
            f"{type(backend).__name__} cannot wait for a job's result; use "
            "queuey.sync.ThreadedBackend over PostgresBackend or MemoryBackend"
        )
    seconds = _seconds(timeout)
    return _value(str(job_id), backend.wait_end(str(job_id), seconds), adapter, seconds)


def _seconds(timeout: Duration | None) -> float | None:
    return None if timeout is None else parse_duration(timeout, "timeout").total_seconds()


def _value(job_id: str, end: JobEnd | None, adapter: TypeAdapter[T], seconds: float | None) -> T:
    """The result of a job that ended as ``end`` (``None``: not within ``seconds``).

    Raises:
        ResultTimeoutError, JobFailedError, ResultError: as for ``await_result``.
    """
    if end is None:
        raise ResultTimeoutError(job_id, seconds or 0.0)
    if end.state != "done":
        raise JobFailedError(job_id, end.state, end.error)
    try:
        return adapter.validate_json("null" if end.result is None else end.result)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the value"
        raise ResultError(
            f"the stored result of job {job_id} does not read as the type asked for: "
            f"{where}: {first['msg']}; ask for the result type its job declares",
            job_id,
        ) from None


class JobHandle(EnqueueResult, Generic[T]):
    """What ``enqueue`` returns for a job that declares a result type ``T``: its job id (a
    ``str``, and an ``EnqueueResult``) that can also wait for the result.

    Attributes:
        outcome, inserted: as for ``EnqueueResult`` (not inserted: a unique duplicate was
            refused or replaced the pending holder, and this handle waits for that job).
    """

    workflow_id: str | None = None
    """The workflow whose last step this is (``enqueue_workflow``), else ``None``."""
    _backend: object
    _adapter: TypeAdapter[T]

    def __new__(
        cls,
        job_id: str,
        backend: object,
        adapter: TypeAdapter[T],
        outcome: EnqueueOutcome = "inserted",
    ) -> JobHandle[T]:
        handle = str.__new__(cls, job_id)
        if outcome != "inserted":
            handle.inserted = False
            handle.outcome = outcome
        handle._backend = backend
        handle._adapter = adapter
        return handle

    async def result(self, timeout: Duration | None = None) -> T:
        """Wait for the job to end and return its result (at once when it has ended).

        Args:
            timeout: the longest to wait (duration string, ``timedelta`` or seconds; ``None``:
                no limit).

        Raises:
            JobFailedError: the job ended failed (dead-lettered) or cancelled; it carries the
                job id, the state and the last error.
            ResultTimeoutError: it had not ended within ``timeout``; the job is left alone.
            UnknownJobError: the backend no longer has the job (deleted after its retention).
            ResultError: the stored result does not read as the result type (its ``job_id``
                set).
            BackendError: the backend could not be asked.
        """
        return await await_result(self._backend, self.job_id, self._adapter, timeout)

    async def progress(self) -> Progress | None:
        """The last progress the job's handler reported (``ctx.progress``), as stored now;
        ``None`` when none was (or the job is unknown).

        Raises:
            BackendError: the backend could not be asked.
        """
        if not isinstance(self._backend, JobLookup):
            return None
        info = await self._backend.job(self.job_id)
        return None if info is None else info.progress

    def __repr__(self) -> str:
        return f"JobHandle({self.job_id!r}, outcome={self.outcome!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (EnqueueResult, (self.job_id, self.inserted, self.outcome))


class SyncJobHandle(EnqueueResult, Generic[T]):
    """What ``queuey.sync.Producer.enqueue`` returns for a job that declares a result type
    ``T``: its job id (a ``str``, and an ``EnqueueResult``) whose ``result()`` blocks until the
    job ends.

    Attributes:
        inserted: as for ``EnqueueResult``.
    """

    workflow_id: str | None = None
    """The workflow whose last step this is (``enqueue_workflow``), else ``None``."""
    _backend: object
    _adapter: TypeAdapter[T]

    def __new__(
        cls, job_id: str, backend: object, adapter: TypeAdapter[T], inserted: bool = True
    ) -> SyncJobHandle[T]:
        handle = str.__new__(cls, job_id)
        if not inserted:
            handle.inserted = False
        handle._backend = backend
        handle._adapter = adapter
        return handle

    def result(self, timeout: Duration | None = None) -> T:
        """As ``JobHandle.result``, blocking the calling thread.

        Raises:
            JobFailedError, ResultTimeoutError, UnknownJobError, ResultError, BackendError: as
                for ``JobHandle.result``.
            NotSupportedError: the sync backend cannot wait for results.
        """
        return wait_result(self._backend, self.job_id, self._adapter, timeout)

    def progress(self) -> Progress | None:
        """As ``JobHandle.progress``, blocking the calling thread."""
        if not isinstance(self._backend, SyncJobLookup):
            return None
        info = self._backend.job(self.job_id)
        return None if info is None else info.progress

    def __repr__(self) -> str:
        return f"SyncJobHandle({self.job_id!r}, inserted={self.inserted})"

    def __reduce__(self) -> tuple[Any, ...]:
        return (EnqueueResult, (self.job_id, self.inserted))
