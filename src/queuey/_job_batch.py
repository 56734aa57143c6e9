"""A bulk enqueue of jobs of one type, held as columns: ``JobBatch``.

``enqueue_many`` of many jobs of one class, on a backend that takes them
(``takes_job_batches``, PostgreSQL), is dumped by one ``TypeAdapter(list[J]).dump_json`` call
into one ASCII JSON array, checked on that text as a whole (``job_batch``) and sent as it is:
one ``COPY`` (due now) or one statement whose payloads are that array. No envelope is built per
job, and the payloads are never turned into Python values and back.

The whole-text check admits what ``job_payload`` admits job by job, and no more: a text with a
``NaN``, ``Infinity`` or ``null`` token (``dump_json`` writes a non-finite float as ``null``),
a run of more than ``MAX_INT_DIGITS`` digits, an element that may nest deeper than
``MAX_DEPTH``, a string that does not split cleanly into its elements, or a dump that fails
(a lone surrogate, a serializer that raises) is not sent this way: ``job_batch`` returns
``None`` and the jobs go through ``job_payload`` one by one, which names the offending field
or finds nothing wrong (a ``None`` field writes ``null``: such jobs take that path).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterator, Sequence
from typing import Any, overload

from pydantic import TypeAdapter

from queuey._payload import MAX_DEPTH, MAX_INT_DIGITS
from queuey.envelope import Envelope
from queuey.unique import EnqueueResult

__all__ = ["JobBatch", "inserted", "job_batch", "job_classes"]

_inserted_result: Callable[[str], EnqueueResult] = functools.partial(str.__new__, EnqueueResult)
_ADAPTERS: dict[type[Any], TypeAdapter[Any]] = {}
_SUSPECT = (b"NaN", b"Infinity", b"null")
_BOUNDARY = "},{"
_LONG_DIGITS = re.compile(rb"[0-9]{%d}" % (MAX_INT_DIGITS + 1))


class JobBatch(Sequence[Envelope]):
    """The first-attempt envelopes of jobs of one class, at one priority, with no headers, as
    columns. Indexing or iterating builds ``Envelope`` objects (payloads read back from the
    JSON); a backend that takes batches reads the columns instead.

    Attributes:
        ids: each job's id, in order.
        job_type: the jobs' name on the wire.
        queue: their queue's fully qualified name.
        priority: their priority.
        enqueued_at_ms: when they were enqueued (Unix epoch milliseconds).
        payloads: the JSON array (ASCII) of their payloads, in order: ``[{...},{...}]``, each
            element an object and the elements separated by exactly one ``},{`` each.
    """

    __slots__ = ("_pieces", "enqueued_at_ms", "ids", "job_type", "payloads", "priority", "queue")

    def __init__(
        self,
        ids: list[str],
        job_type: str,
        queue: str,
        priority: int,
        enqueued_at_ms: int,
        payloads: str,
    ) -> None:
        self.ids = ids
        self.job_type = job_type
        self.queue = queue
        self.priority = priority
        self.enqueued_at_ms = enqueued_at_ms
        self.payloads = payloads
        self._pieces: list[str] | None = None

    def __len__(self) -> int:
        return len(self.ids)

    def pieces(self) -> list[str]:
        """Each payload's JSON text without its outer braces, in order (``{`` + piece + ``}``
        is the payload)."""
        if self._pieces is None:
            self._pieces = self.payloads[2:-2].split(_BOUNDARY)
        return self._pieces

    @overload
    def __getitem__(self, index: int) -> Envelope: ...

    @overload
    def __getitem__(self, index: slice) -> list[Envelope]: ...

    def __getitem__(self, index: int | slice) -> Envelope | list[Envelope]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        job_id = self.ids[index]
        payload = json.loads("{" + self.pieces()[index] + "}")
        return Envelope.trusted(
            job_id, self.job_type, self.queue, 1, self.enqueued_at_ms, 0, self.priority,
            payload, {}, "job",
        )  # fmt: skip

    def __iter__(self) -> Iterator[Envelope]:
        for index in range(len(self.ids)):
            yield self[index]


def inserted(envelopes: Sequence[Envelope]) -> list[EnqueueResult]:
    """An inserted ``EnqueueResult`` per envelope (the ids of a ``JobBatch`` read from its
    column), each built by ``str.__new__`` alone: a bulk enqueue makes thousands."""
    ids = envelopes.ids if isinstance(envelopes, JobBatch) else [e.job_id for e in envelopes]
    return list(map(_inserted_result, ids))


def job_classes(jobs: Sequence[Any], envelopes: Sequence[Envelope]) -> set[type[Any]]:
    """The classes of ``jobs`` (one when ``envelopes`` is their ``JobBatch``)."""
    if isinstance(envelopes, JobBatch):
        return {type(jobs[0])}
    return {type(job) for job in jobs}


def _adapter(job_type: type[Any]) -> TypeAdapter[Any]:
    adapter = _ADAPTERS.get(job_type)
    if adapter is None:
        adapter = _ADAPTERS[job_type] = TypeAdapter(list[job_type])  # type: ignore[valid-type]
    return adapter


def job_batch(
    jobs: Sequence[Any],
    ids: list[str],
    job_type: str,
    queue: str,
    priority: int,
    enqueued_at_ms: int,
) -> JobBatch | None:
    """The ``JobBatch`` of ``jobs`` (every one an instance of exactly one class), dumped in one
    call and checked as one text; ``None`` when the text must be checked job by job (see the
    module's text), or when the jobs are not all of one class.

    Args:
        jobs: the jobs.
        ids: their ids, in order.
        job_type: their name on the wire.
        queue: their queue's fully qualified name.
        priority: their priority (already checked).
        enqueued_at_ms: the enqueue time (Unix epoch milliseconds).
    """
    cls = type(jobs[0])
    for job in jobs:
        if type(job) is not cls:
            return None
    try:
        data = _adapter(cls).dump_json(list(jobs), ensure_ascii=True)
    except Exception:  # named, field by field, by job_payload
        return None
    if not _plain(data):
        return None
    text = data.decode("ascii")
    if text.count(_BOUNDARY) != len(jobs) - 1 or not text.startswith("[{"):
        return None  # a string holds "},{": the elements cannot be told apart by it
    batch = JobBatch(ids, job_type, queue, priority, enqueued_at_ms, text)
    if _brackets(data) - 1 - len(jobs) >= MAX_DEPTH:
        for piece in batch.pieces():  # some payloads nest: check each, as job_payload does
            if piece.count("[") + piece.count("{") + 1 > MAX_DEPTH:
                return None
    return batch


def _plain(data: bytes) -> bool:
    """Whether the JSON array ``data`` has no token that job_payload looks at job by job."""
    for token in _SUSPECT:
        if token in data:
            return False
    return len(data) <= MAX_INT_DIGITS or _LONG_DIGITS.search(data) is None


def _brackets(data: bytes) -> int:
    return data.count(b"[") + data.count(b"{")
