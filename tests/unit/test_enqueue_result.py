"""``EnqueueResult``: a job id that says what the enqueue did, compatible with a plain id."""

from __future__ import annotations

import copy
import pickle

import pytest

from queuey import EnqueueResult

ID = "00000000-0000-4000-8000-000000000001"


@pytest.mark.parametrize(
    ("result", "outcome", "inserted"),
    [
        (EnqueueResult(ID), "inserted", True),
        (EnqueueResult(ID, False), "skipped", False),
        (EnqueueResult(ID, outcome="replaced"), "replaced", False),
        (EnqueueResult(ID, outcome="skipped"), "skipped", False),
        (EnqueueResult(ID, outcome="inserted"), "inserted", True),
    ],
)
def test_the_outcome_and_inserted_agree(
    result: EnqueueResult, outcome: str, inserted: bool
) -> None:
    assert (result.outcome, result.inserted) == (outcome, inserted)
    assert result == ID and result.job_id == ID and type(result.job_id) is str
    assert repr(result) == f"EnqueueResult({ID!r}, outcome={outcome!r})"
    for again in (pickle.loads(pickle.dumps(result)), copy.deepcopy(result)):
        assert (again, again.outcome, again.inserted) == (ID, outcome, inserted)
