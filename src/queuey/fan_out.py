"""Dynamic fan-out: a workflow step whose handler decides, while it runs, how many steps come
after it.

```python
class Split(Job[AppQueues, FanOut[int]], queue=AppQueues.web):
    text: str

class Total(Job[AppQueues, int], queue=AppQueues.web):
    counts: list[int]

    @classmethod
    def from_counts(cls, counts: list[int]) -> Total:
        return cls(counts=counts)

@worker.handler(Split)
async def split(job: Split, ctx: JobContext) -> FanOut[int]:
    return FanOut(Count(text=part) for part in job.text.split())   # Count: Job[..., int]

flow = start(Split(text="a bb ccc")).then_each(Total.from_counts)
```

A step's job class declares ``FanOut[R]`` as its result type and its handler returns
``FanOut(jobs)``, each job's result type an ``R``. The jobs become steps of its workflow, due
at once, and the step after it (``then_each`` / ``then_each_partial``) waits for all of them
and is built from the list of their results, in order. The jobs and the re-wiring are stored by
the statement that records the fanning step's success (PostgreSQL: one transaction): a worker
killed before it commits adds nothing (the step runs again and decides anew), after it all of
it. A step that fans out to no job releases its successor with an empty list.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from pydantic import GetCoreSchemaHandler
from pydantic_core import CoreSchema, core_schema

from queuey._payload import job_payload
from queuey.backends.steps import FAN_OUT_KEY
from queuey.errors import ConfigError
from queuey.jobs import Job

__all__ = ["FanOut"]

R = TypeVar("R")


class FanOut(Generic[R]):
    """The result of a step that adds steps to its workflow: ``jobs``, each a job whose result
    is an ``R``.

    Attributes:
        jobs: the jobs to add (empty when read back from a stored result).
        job_ids: their job ids (UUID strings), in order, known before they are stored.

    Raises:
        ConfigError: an item of ``jobs`` is not a ``Job``.
    """

    def __init__(self, jobs: Iterable[Job[Any, R]]) -> None:
        self.jobs: tuple[Job[Any, R], ...] = tuple(jobs)
        for job in self.jobs:
            if not isinstance(job, Job):
                raise ConfigError(f"FanOut: {job!r} is not a job; give Job instances")
        self.job_ids = [str(uuid.uuid4()) for _ in self.jobs]

    def __repr__(self) -> str:
        return f"FanOut({len(self.job_ids)} jobs: {', '.join(self.job_ids)})"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> CoreSchema:
        return core_schema.no_info_plain_validator_function(
            _read, serialization=core_schema.plain_serializer_function_ser_schema(_stored)
        )


def _stored(fan: FanOut[Any]) -> dict[str, Any]:
    """``fan`` as the result the backend stores (``FAN_OUT_KEY``)."""
    steps, at = [], time.time_ns() // 1_000_000  # at: when enqueued, epoch milliseconds
    for job_id, job in zip(fan.job_ids, fan.jobs, strict=True):
        name = type(job).job_name()
        queue = type(job).job_queue().config.name
        payload = job_payload(job, name)
        steps.append({"id": job_id, "job_type": name, "queue": queue, "payload": payload, "at": at})
    return {FAN_OUT_KEY: steps}


def _read(value: Any) -> FanOut[Any]:
    """A ``FanOut`` as given, or read back from its stored form (its job ids only)."""
    if isinstance(value, FanOut):
        return value
    steps = value.get(FAN_OUT_KEY) if isinstance(value, dict) else None
    if not isinstance(steps, list):
        raise ValueError(f"not a FanOut (return FanOut(jobs) from the handler): {value!r}")
    fan: FanOut[Any] = FanOut(())
    fan.job_ids = [str(step["id"]) for step in steps]
    return fan
