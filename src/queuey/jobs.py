"""Jobs: pydantic models bound to one queue of one ``QueueSet``, and the ``JobContext`` a handler
receives.

```python
class SendEmail(Job[AppQueues], queue=AppQueues.emails, retry=RetryPolicy.exponential(5)):
    to: str
```

The class keywords are checked when the class is created: ``queue`` must be a queue of the set
named in ``Job[...]``. A job's name (the envelope's ``job_type`` and the handler dispatch key)
defaults to ``module.QualName``; ``name=`` overrides it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, ClassVar, Generic, cast
from typing import TypeVar as PlainTypeVar

from pydantic import BaseModel, TypeAdapter
from typing_extensions import TypeVar

from queuey._run_scope import RunControls, RunScope
from queuey._validation import Site, check_str, shown
from queuey.errors import ConfigError
from queuey.limits import FlowLimit, LimitSpec, resolve_limits
from queuey.queues import Queue, QueueSet
from queuey.retry import RetryPolicy
from queuey.unique import Unique, UniqueKey

__all__ = ["Job", "JobContext", "NoResult", "Q", "R", "unique_key_of"]

Q = TypeVar("Q", bound=QueueSet)


class NoResult:
    """The result type of a job that declares none (``Job[Set]`` is ``Job[Set, NoResult]``):
    its handler may return anything, and nothing is stored."""


R = TypeVar("R", default=NoResult)


class Job(BaseModel, Generic[Q, R]):
    """Base of every job. Subclass ``Job[YourQueueSet]`` (or ``Job[YourQueueSet, Result]``,
    for a job whose handler returns a ``Result``: a pydantic model or any type pydantic
    validates, stored with the job's completion and awaited with ``handle.result()``) with
    ``queue=`` (required), ``retry=`` (a ``RetryPolicy`` that beats the queue's), ``name=``
    ``unique=`` (a ``Unique``: refuse a duplicate while the first is pending or running)
    and ``limits=`` (a list of ``Concurrency`` / ``RateLimit`` for this job type) class
    keywords.

    Raises:
        ConfigError: at class creation, naming the job class, when ``queue`` is missing or
            belongs to another set, ``retry`` is not a valid ``RetryPolicy``, ``name`` is
            not a non-empty string, ``unique`` is not a ``Unique`` or names a field the job
            does not have, or ``limits`` is not a list of limits or names such a field.
    """

    __queuey_queue__: ClassVar[Queue | None] = None
    __queuey_retry__: ClassVar[RetryPolicy | None] = None
    __queuey_name__: ClassVar[str] = ""
    __queuey_unique__: ClassVar[Unique | None] = None
    __queuey_result__: ClassVar[TypeAdapter[Any] | None] = None
    __queuey_limits__: ClassVar[tuple[LimitSpec, ...]] = ()

    def __init_subclass__(
        cls,
        queue: Queue | None = None,
        retry: RetryPolicy | None = None,
        name: str | None = None,
        unique: Unique | None = None,
        limits: list[FlowLimit] | tuple[FlowLimit, ...] | None = None,
        **kwargs: Any,
    ) -> None:
        # The class keywords are checked in __pydantic_init_subclass__, once pydantic has
        # finished building the class (and knows whether it is its own ``Job[Set]``).
        super().__init_subclass__(**kwargs)

    @classmethod
    def __pydantic_init_subclass__(
        cls,
        queue: Queue | None = None,
        retry: RetryPolicy | None = None,
        name: str | None = None,
        unique: Unique | None = None,
        limits: list[FlowLimit] | tuple[FlowLimit, ...] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        if cls.__pydantic_generic_metadata__["origin"] is not None:
            return  # the Job[Set] class pydantic creates, not a user job
        site = Site.declaration(cls.__qualname__)
        inherited = cls.__queuey_queue__
        cls.__queuey_queue__ = _bound_queue(site, inherited if queue is None else queue, cls)
        if retry is not None:
            if not isinstance(retry, RetryPolicy):
                raise site.error("retry", f"expected a RetryPolicy, got {shown(retry)}")
            cls.__queuey_retry__ = retry.check(site)
        if name is not None:
            check_str(name, "name", non_empty=True, site=site)
        cls.__queuey_name__ = name or f"{cls.__module__}.{cls.__qualname__}"
        if unique is not None:
            cls.__queuey_unique__ = _checked_unique(site, unique, cls)
        if limits is not None:
            fields = list(cls.model_fields)
            cls.__queuey_limits__ = resolve_limits(site, limits, cls.__queuey_name__, fields)
        cls.__queuey_result__ = _result_adapter(site, cls)

    @classmethod
    def job_queue(cls) -> Queue:
        """The queue this job type is bound to."""
        if cls.__queuey_queue__ is None:
            raise ConfigError(f"{cls.__qualname__} is not bound to a queue")
        return cls.__queuey_queue__

    @classmethod
    def job_queue_set(cls) -> type[Q]:
        """The ``QueueSet`` this job type belongs to (its queue's set)."""
        return cast("type[Q]", cls.job_queue().queue_set)

    @classmethod
    def job_name(cls) -> str:
        """The job type name carried in envelopes (``module.QualName`` unless ``name=``)."""
        return cls.__queuey_name__

    @classmethod
    def job_retry(cls) -> RetryPolicy | None:
        """The job's own retry policy, or ``None`` to use the queue's."""
        return cls.__queuey_retry__

    @classmethod
    def job_unique(cls) -> Unique | None:
        """The job's ``Unique`` declaration, or ``None``."""
        return cls.__queuey_unique__

    @classmethod
    def job_limits(cls) -> tuple[LimitSpec, ...]:
        """The job type's own flow limits (its ``limits=`` keyword), resolved."""
        return cls.__queuey_limits__

    @classmethod
    def result_type(cls) -> Any:
        """The declared result type (``Job[Set, Result]``), or ``None`` when the job declares
        none."""
        adapter = cls.__queuey_result__
        return None if adapter is None else _declared_args(cls)[1]

    @classmethod
    def effective_retry(cls) -> RetryPolicy:
        """The job's policy, else the queue's, else one attempt (first failure dead-letters)."""
        return cls.__queuey_retry__ or cls.job_queue().config.retry or RetryPolicy.none()


def _bound_queue(site: Site, queue: object, cls: type[Job[Any, Any]]) -> Queue:
    """``queue`` if it is a queue of the set named in ``Job[...]``.

    Raises:
        ConfigError: naming the job class, when it is not.
    """
    if not isinstance(queue, Queue) or queue.queue_set is None:
        raise site.error(
            "queue", f"expected a Queue attribute of a QueueSet (queue=...), got {shown(queue)}"
        )
    queue_set = _declared_set(cls)
    if queue_set is not None and not issubclass(queue.queue_set, queue_set):
        raise site.error(
            "queue",
            f"{queue.name!r} belongs to {queue.queue_set.__name__}, not {queue_set.__name__}",
        )
    return queue


def unique_key_of(job: Job[Any, Any]) -> UniqueKey | None:
    """``job``'s unique key (``None`` when its class declares no ``unique``)."""
    unique = type(job).__queuey_unique__
    if unique is None:
        return None
    fields = job.model_dump(mode="json", include=set(unique.by))
    return unique.key_for(job.job_name(), job.job_queue().name, fields)


def _checked_unique(site: Site, unique: object, cls: type[Job[Any, Any]]) -> Unique:
    """``unique`` if it is a ``Unique`` whose ``by`` names fields of ``cls``.

    Raises:
        ConfigError: naming the job class and the missing field.
    """
    if not isinstance(unique, Unique):
        raise site.error("unique", f"expected a Unique(...), got {shown(unique)}")
    unique.check(site)
    for field_name in unique.by:
        if field_name not in cls.model_fields:
            raise site.error("unique", f"by: {field_name!r} is not a field of {cls.__qualname__}")
    return unique


def _declared_args(cls: type[Job[Any, Any]]) -> tuple[Any, ...]:
    """The arguments of the ``Job[...]`` that ``cls`` subclasses (empty when none)."""
    for base in cls.__mro__:
        meta = getattr(base, "__pydantic_generic_metadata__", None)
        if meta and meta["origin"] is Job and meta["args"]:
            return tuple(meta["args"])
    return ()


def _declared_set(cls: type[Job[Any, Any]]) -> type[QueueSet] | None:
    args = _declared_args(cls)
    arg = args[0] if args else None
    return arg if isinstance(arg, type) and issubclass(arg, QueueSet) else None


def _result_adapter(site: Site, cls: type[Job[Any, Any]]) -> TypeAdapter[Any] | None:
    """The validator of ``cls``'s declared result type (``None`` when it declares none).

    Raises:
        ConfigError: naming the job class, when pydantic cannot validate that type.
    """
    args = _declared_args(cls)
    result = args[1] if len(args) > 1 else NoResult
    if result is NoResult or isinstance(result, PlainTypeVar):
        return None
    try:
        return TypeAdapter(result)
    except Exception as exc:
        raise site.error("result", f"pydantic cannot validate {result!r}: {exc}") from None


@dataclass(frozen=True)
class JobContext(RunControls):
    """What a handler knows about the delivery it is handling, and what it may ask of it:
    ``cancelled`` / ``await cancellation()`` (the job was cancelled while it runs: stop at a
    safe point) and ``transaction()`` (PostgreSQL: commit the handler's writes and the job's
    completion together).

    Attributes:
        job_id: the job's id (a UUID string), stable across retries and deferrals.
        job_type: the job's name.
        queue: the fully qualified queue name.
        attempt: this run's number, 1-based (a retry and a redelivery each add one).
        max_attempts: from the effective retry policy.
        deferrals: how many times the job was deferred so far.
        priority: the priority it was delivered with.
        enqueued_at_ms: epoch milliseconds of the first enqueue (producer's clock; informational).
        age: time since the first enqueue (worker's clock; informational).
        headers: string headers from the envelope (trace context).
        redeliveries: runs of this job that ended with a lost worker (they spend no attempt
            of the retry policy).
        run_scope: the run's controls (set by the worker; ``None`` in a context built by hand).
    """

    job_id: str
    job_type: str
    queue: str
    attempt: int
    max_attempts: int
    deferrals: int
    priority: int
    enqueued_at_ms: int
    age: timedelta
    headers: dict[str, str] = field(default_factory=dict)
    redeliveries: int = 0
    run_scope: RunScope | None = field(default=None, repr=False, compare=False)

    @property
    def batch_id(self) -> str | None:
        """The id of the batch this job is a member of (``queuey.batches``), else ``None``."""
        return self.headers.get("queuey-batch")

    @property
    def is_last_attempt(self) -> bool:
        """True when a retryable failure now would dead-letter the job."""
        return self.attempt - self.redeliveries >= self.max_attempts
