"""The parameters of the publish statements, built from envelopes.

Three statements insert rows (``queries.sql``): ``publish_job`` for the most common enqueue (one
first-attempt typed job, due now, no headers, no message TTL: only what varies is sent, every
other column takes its default), ``publish_one`` for any other single envelope, and ``publish``
for several (one array per column as a literal, payloads and headers as one JSON array each).

Several rows due now with no message TTL (the usual bulk enqueue) go through ``COPY`` instead
(``copy_rows``: one text in COPY's format, built in one join, and one ``pg_notify`` per queue in
the same transaction): measured at 1.1-1.4x the rows/s of ``publish`` on the server and cheaper
to build.

Two more take the same arrays and a key: ``publish_unique`` (a unique key per row, the rows
folded first so that no key appears twice in one statement) and ``publish_once`` (one
idempotency key for all the rows).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

from pydantic_core import to_json

from queuey._job_batch import JobBatch
from queuey.backends.postgres._arrays import nullable_text_array, number_array, text_array
from queuey.envelope import PUBLISHED_BY, Envelope, Kind
from queuey.unique import EnqueueOutcome, EnqueueResult, IdempotencyKey, UniqueKey

__all__ = [
    "REPLACE_BIT",
    "folded",
    "SingleQuery",
    "TtlOf",
    "CopyRows",
    "bulk_params",
    "copy_rows",
    "fold",
    "once_params",
    "single_params",
    "unique_params",
    "unique_results",
]

REPLACE_BIT = 16
"""The bit of ``unique_states`` that marks ``on_conflict="replace"`` (migration 0002)."""

TtlOf = Callable[[Kind, str], float | None]
"""The message TTL of a (kind, queue), in seconds, or ``None``."""

SingleQuery = Literal["publish_job", "publish_one"]
"""The statements that insert one row."""


def single_params(
    envelope: Envelope, delay: float, ttl_of: TtlOf, channel: str
) -> tuple[SingleQuery, dict[str, Any]]:
    """The statement name for one envelope and its parameters.

    Args:
        envelope: the envelope.
        delay: seconds until it is due.
        ttl_of: the queues' message TTLs.
        channel: the NOTIFY channel.
    """
    ttl = ttl_of(envelope.kind, envelope.queue)
    params: dict[str, Any] = {
        "id": envelope.job_id,
        "queue": envelope.queue,
        "job_type": envelope.job_type,
        "priority": envelope.priority,
        "payload": _json_text(envelope.payload),
        "enqueued_at_ms": envelope.enqueued_at_ms,
        "channel": channel,
    }
    plain = envelope.kind == "job" and envelope.attempt == 1 and not envelope.deferrals
    if plain and not envelope.headers and not delay and ttl is None:
        return "publish_job", params
    params.update(
        kind=envelope.kind,
        attempt=envelope.attempt,
        deferrals=envelope.deferrals,
        headers=_json_text(envelope.headers),
        published_by=envelope.headers.get(PUBLISHED_BY, ""),
        ttl=ttl,
        delay=delay,
    )
    return "publish_one", params


def bulk_params(
    envelopes: Sequence[Envelope], delay: float, ttl_of: TtlOf, channel: str
) -> dict[str, Any]:
    """The parameters of ``publish`` for several envelopes (arguments as for
    ``single_params``)."""
    if isinstance(envelopes, JobBatch):
        return _batch_params(envelopes, delay, ttl_of("job", envelopes.queue), channel)
    ttls: dict[tuple[Kind, str], float | None] = {}
    for e in envelopes:
        if (e.kind, e.queue) not in ttls:
            ttls[e.kind, e.queue] = ttl_of(e.kind, e.queue)
    return {
        "ids": text_array([e.job_id for e in envelopes]),
        "kinds": text_array([e.kind for e in envelopes]),
        "queues": text_array([e.queue for e in envelopes]),
        "job_types": text_array([e.job_type for e in envelopes]),
        "priorities": number_array([e.priority for e in envelopes]),
        "attempts": number_array([e.attempt for e in envelopes]),
        "deferrals": number_array([e.deferrals for e in envelopes]),
        "payloads": _json_text([e.payload for e in envelopes]),
        "headers": _json_text([e.headers for e in envelopes]),
        "published_by": text_array([e.headers.get(PUBLISHED_BY, "") for e in envelopes]),
        "enqueued_at_ms": number_array([e.enqueued_at_ms for e in envelopes]),
        "ttls": number_array([ttls[e.kind, e.queue] for e in envelopes]),
        "delay": delay,
        "channel": channel,
    }


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def _copy_field(value: str) -> str:
    """``value`` as a field of COPY's text format (backslash, tab, newline, CR escaped)."""
    if "\\" in value or "\t" in value or "\n" in value or "\r" in value:
        return value.translate(_COPY_ESCAPES)
    return value


def _json_text(value: Any) -> str:
    """The compact ASCII JSON text of ``value`` (payloads and headers, already checked; every
    character beyond ASCII escaped, so a database in any encoding stores it as sent), written
    by pydantic-core (about 5x faster than ``json.dumps``); ``json.dumps`` for what it refuses
    and on a pydantic-core older than ``ensure_ascii`` (2.35)."""
    try:
        return to_json(value, ensure_ascii=True).decode()
    except (TypeError, ValueError):  # a lone surrogate in headers: PostgreSQL names it
        return json.dumps(value, separators=(",", ":"))


CopyRows = tuple[str, list[str]]
"""The data of ``publish_copy`` (COPY's text format, one line per row) and the queues to
notify."""


def copy_rows(envelopes: Sequence[Envelope], delay: float, ttl_of: TtlOf) -> CopyRows | None:
    """The ``publish_copy`` data of the envelopes, or ``None`` when a row needs the server to
    compute a column (a delay, a message TTL, a topic publish nobody subscribes to): those go
    through ``publish``.

    The JSON text is ASCII with every control character escaped (tab, newline and carriage
    return included), so of COPY's special characters only its backslashes need doubling.
    """
    if delay:
        return None
    if isinstance(envelopes, JobBatch):
        return _batch_copy(envelopes, ttl_of)
    fields: dict[tuple[Kind, str, str], str] = {}
    lines = []
    dumps = _json_text
    for e in envelopes:
        key = (e.kind, e.queue, e.job_type)
        prefix = fields.get(key)
        if prefix is None:
            if ttl_of(e.kind, e.queue) is not None or (e.kind == "topic" and not e.job_type):
                return None
            prefix = fields[key] = f"{e.kind}\t{_copy_field(e.queue)}\t{_copy_field(e.job_type)}"
        headers = e.headers
        if headers:
            extra = dumps(headers).replace("\\", "\\\\")
            by = _copy_field(headers.get(PUBLISHED_BY, ""))
        else:
            extra, by = "{}", ""
        payload = dumps(e.payload).replace("\\", "\\\\")
        lines.append(
            f"{e.job_id}\t{prefix}\t{e.priority}\t{e.attempt - 1}\t{e.deferrals}\t"
            f"{payload}\t{extra}\t{by}\t{e.enqueued_at_ms}\n"
        )
    return "".join(lines), sorted({queue for _, queue, _ in fields})


def _batch_params(batch: JobBatch, delay: float, ttl: float | None, channel: str) -> dict[str, Any]:
    """``bulk_params`` of a ``JobBatch``: its payload array sent as it is, the columns every
    row shares repeated in one join each."""
    count = len(batch)
    return {
        "ids": text_array(batch.ids),
        "kinds": _repeated("job", count),
        "queues": _repeated(batch.queue, count),
        "job_types": _repeated(batch.job_type, count),
        "priorities": _repeated(str(batch.priority), count),
        "attempts": _repeated("1", count),
        "deferrals": _repeated("0", count),
        "payloads": batch.payloads,
        "headers": "[" + ",".join(["{}"] * count) + "]",
        "published_by": _repeated("", count),
        "enqueued_at_ms": _repeated(str(batch.enqueued_at_ms), count),
        "ttls": _repeated("NULL" if ttl is None else repr(ttl), count, quoted=False),
        "delay": delay,
        "channel": channel,
    }


def _repeated(value: str, count: int, *, quoted: bool = True) -> str:
    """The array literal of ``count`` times ``value``."""
    element = text_array([value])[1:-1] if quoted else value
    return "{" + ",".join([element] * count) + "}"


def _batch_copy(batch: JobBatch, ttl_of: TtlOf) -> CopyRows | None:
    """``copy_rows`` of a ``JobBatch`` (due now): one line per row from its payload array, split
    at the element boundaries ``JobBatch`` guarantees (backslashes doubled first, which leaves
    them where they are); ``None`` when its queue has a message TTL."""
    if ttl_of("job", batch.queue) is not None:
        return None
    text = batch.payloads
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    pieces = text[2:-2].split("},{")
    queue, job_type = _copy_field(batch.queue), _copy_field(batch.job_type)
    head = f"\tjob\t{queue}\t{job_type}\t{batch.priority}\t0\t0\t{{"
    tail = f"}}\t{{}}\t\t{batch.enqueued_at_ms}\n"
    lines = [
        f"{job_id}{head}{piece}{tail}" for job_id, piece in zip(batch.ids, pieces, strict=True)
    ]
    return "".join(lines), [batch.queue]


def fold(
    envelopes: Sequence[Envelope], keys: Sequence[UniqueKey | None]
) -> tuple[Sequence[Envelope], Sequence[UniqueKey | None], list[int]]:
    """The envelopes to send, with no unique key twice, and for each given envelope the index
    of the sent one it became: a later duplicate of a key folds into the first, whose payload
    and headers it replaces when the key says ``replace`` (as if enqueued one after another).
    """
    named = [key.key for key in keys if key is not None]
    if len(set(named)) == len(named):  # no key twice: nothing folds (a JobBatch stays one)
        return envelopes, keys, list(range(len(envelopes)))
    sent: list[Envelope] = []
    sent_keys: list[UniqueKey | None] = []
    where: list[int] = []
    first: dict[str, int] = {}
    for envelope, key in zip(envelopes, keys, strict=True):
        at = None if key is None else first.get(key.key)
        if at is None:
            if key is not None:
                first[key.key] = len(sent)
            where.append(len(sent))
            sent.append(envelope)
            sent_keys.append(key)
            continue
        where.append(at)
        if key is not None and key.replace:
            update = {"payload": envelope.payload, "headers": envelope.headers}
            sent[at] = sent[at].model_copy(update=update)
    return sent, sent_keys, where


def folded(outcome: EnqueueOutcome, again: bool, key: UniqueKey | None) -> EnqueueOutcome:
    """The outcome of an envelope of a ``publish_unique`` call: its row's ``outcome``, unless
    ``fold`` folded it into an earlier envelope of the call (``again``): then it replaced that
    one's payload (``replace``) or was skipped."""
    if not again:
        return outcome
    return "replaced" if key is not None and key.replace else "skipped"


def unique_params(
    envelopes: Sequence[Envelope],
    keys: Sequence[UniqueKey | None],
    delay: float,
    ttl_of: TtlOf,
    channel: str,
) -> dict[str, Any]:
    """The parameters of ``publish_unique`` (keys distinct: ``fold`` first)."""
    params = bulk_params(envelopes, delay, ttl_of, channel)
    params["keys"] = nullable_text_array([None if k is None else k.key for k in keys])
    params["masks"] = number_array(
        [None if k is None else k.mask | (REPLACE_BIT if k.replace else 0) for k in keys]
    )
    params["periods"] = number_array([None if k is None else k.period for k in keys])
    return params


class Written(Protocol):
    """A row of ``publish_unique``: the id written or found, and what the statement did."""

    @property
    def id(self) -> str:
        """The job id."""
        ...

    @property
    def outcome(self) -> EnqueueOutcome:
        """``"inserted"``, ``"replaced"`` or ``"skipped"``."""
        ...


def unique_results(
    rows: Sequence[Written], where: Sequence[int], keys: Sequence[UniqueKey | None]
) -> list[EnqueueResult]:
    """One result per envelope given to ``fold`` (``where``: the sent row each became; ``keys``:
    each one's key), from the rows ``publish_unique`` returned for the sent ones (``folded``
    says what became of an envelope folded into an earlier one of the same call)."""
    results, seen = [], set()
    for at, key in zip(where, keys, strict=True):
        row = rows[at]
        results.append(EnqueueResult(row.id, outcome=folded(row.outcome, at in seen, key)))
        seen.add(at)
    return results


def once_params(
    envelopes: Sequence[Envelope], idempotency: IdempotencyKey, ttl_of: TtlOf, channel: str
) -> dict[str, Any]:
    """The parameters of ``publish_once``: the rows due now, under ``idempotency``."""
    params = bulk_params(envelopes, 0.0, ttl_of, channel)
    params.update(
        key=idempotency.key, fingerprint=idempotency.fingerprint, window=idempotency.window
    )
    return params
