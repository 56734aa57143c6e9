"""``Envelope.trusted`` (built without validation on the hot paths) must give the same envelope
as ``Envelope(...)``, and ``new_job_ids`` the same kind of ids as ``new_job_id``."""

from __future__ import annotations

import copy
import dataclasses
import pickle
import uuid

import pytest
from pydantic import ValidationError

from queuey._runtime.faces.job import job_context
from queuey.envelope import Envelope, new_job_ids
from queuey.jobs import JobContext

FIELDS = {
    "job_id": "8d4f4a5e-0c7d-4b39-9d1e-2f0c3b4a5d6e",
    "job_type": "app.Job",
    "queue": "app.q",
    "attempt": 3,
    "enqueued_at_ms": 1_700_000_000_000,
    "deferrals": 1,
    "priority": 7,
    "payload": {"a": [1, "x", None]},
    "headers": {"traceparent": "00-abc"},
    "kind": "topic",
    "redeliveries": 1,
}


def test_a_trusted_envelope_is_an_ordinary_envelope() -> None:
    trusted = Envelope.trusted(**FIELDS)  # type: ignore[arg-type]
    validated = Envelope(**FIELDS)
    assert trusted == validated and type(trusted) is Envelope
    assert trusted.model_dump() == validated.model_dump()
    assert trusted.to_bytes() == validated.to_bytes()
    assert Envelope.from_bytes(trusted.to_bytes()) == validated
    assert trusted.next_attempt() == validated.next_attempt()
    assert trusted.deferred(9) == validated.deferred(9)
    assert copy.deepcopy(trusted) == validated
    assert pickle.loads(pickle.dumps(trusted)) == validated
    with pytest.raises(ValidationError):
        trusted.attempt = 4  # type: ignore[misc]  # frozen, like any envelope


def test_new_job_ids_are_distinct_version_4_uuids_in_canonical_form() -> None:
    ids = new_job_ids(2_000)
    assert len(set(ids)) == 2_000
    for job_id in ids:
        parsed = uuid.UUID(job_id)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == job_id
    assert new_job_ids(0) == []


def test_a_job_context_built_on_the_hot_path_is_an_ordinary_job_context() -> None:
    """``job_context`` skips the frozen dataclass's ``__init__``: the object must still hold
    every field, compare and print like one built by hand, and stay frozen."""
    envelope = Envelope(**FIELDS)
    context = job_context(envelope, 5)
    by_hand = JobContext(
        **{f.name: getattr(context, f.name) for f in dataclasses.fields(JobContext)}
    )
    assert set(vars(context)) == {f.name for f in dataclasses.fields(JobContext)}
    assert context == by_hand and repr(context) == repr(by_hand)
    assert (context.attempt, context.max_attempts, context.headers) == (3, 5, FIELDS["headers"])
    assert context.headers is not envelope.headers
    with pytest.raises(dataclasses.FrozenInstanceError):
        context.attempt = 4  # type: ignore[misc]
