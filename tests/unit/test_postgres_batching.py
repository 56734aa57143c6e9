"""The PostgreSQL backend's batching helpers, without a database: acks coalesced into one fenced
statement (``AckBatch``), array literals, and job ids."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence

import pytest

from queuey.backends.postgres._acks import MAX_BATCH, AckBatch, LostClaimError
from queuey.backends.postgres._arrays import number_array, text_array
from queuey.envelope import new_job_id
from queuey.errors import BackendError


class Recorder:
    """Stands in for the ``ack`` statement: records each call, returns the ids it accepts."""

    def __init__(self, lost: frozenset[str] = frozenset(), fail: bool = False) -> None:
        self.calls: list[list[tuple[str, int]]] = []
        self.lost = lost
        self.fail = fail

    async def __call__(self, ids: Sequence[str], attempts: Sequence[int]) -> set[str]:
        self.calls.append(list(zip(ids, attempts, strict=True)))
        await asyncio.sleep(0)
        if self.fail:
            raise BackendError("connection refused")
        return set(ids) - self.lost


async def test_acks_issued_together_go_in_one_statement() -> None:
    record = Recorder()
    batch = AckBatch(record)
    await asyncio.gather(*(batch.ack(f"row-{n}", n + 1) for n in range(50)))
    assert record.calls == [[(f"row-{n}", n + 1) for n in range(50)]]


async def test_only_the_delivery_whose_fence_failed_is_told_its_claim_was_lost() -> None:
    batch = AckBatch(Recorder(lost=frozenset({"b"})))
    results = await asyncio.gather(
        batch.ack("a", 1), batch.ack("b", 2), batch.ack("c", 1), return_exceptions=True
    )
    assert results[0] is None and results[2] is None
    assert isinstance(results[1], LostClaimError)
    assert "claim was lost" in str(results[1])


async def test_a_failed_statement_fails_every_ack_of_its_batch_and_not_the_next() -> None:
    record = Recorder(fail=True)
    batch = AckBatch(record)
    results = await asyncio.gather(batch.ack("a", 1), batch.ack("b", 1), return_exceptions=True)
    assert all(isinstance(r, BackendError) for r in results)
    assert {"job a", "job b"} == {str(r).split(":")[0].split("of ")[-1] for r in results}
    record.fail = False
    await batch.ack("c", 1)
    assert record.calls[-1] == [("c", 1)]


async def test_a_large_burst_is_split_into_statements_of_at_most_max_batch() -> None:
    record = Recorder()
    batch = AckBatch(record)
    await asyncio.gather(*(batch.ack(str(n), 1) for n in range(MAX_BATCH + 10)))
    assert [len(call) for call in record.calls] == [MAX_BATCH, 10]


async def test_close_fails_acks_still_waiting() -> None:
    gate = asyncio.Event()

    async def stuck(ids: Sequence[str], attempts: Sequence[int]) -> set[str]:
        await gate.wait()
        return set(ids)

    batch = AckBatch(stuck)
    pending = asyncio.ensure_future(batch.ack("a", 1))
    await asyncio.sleep(0.01)
    await batch.close()
    with pytest.raises(BackendError):
        await pending


def test_text_array_quotes_every_element() -> None:
    assert text_array([]) == "{}"
    assert text_array(["a", 'b"c', "d\\e", "", "NULL", "{x,y}"]) == (
        '{"a","b\\"c","d\\\\e","","NULL","{x,y}"}'
    )


def test_number_array_spells_none_as_null() -> None:
    assert number_array([1, None, 2.5, -3]) == "{1,NULL,2.5,-3}"


def test_job_ids_are_canonical_random_uuids() -> None:
    for _ in range(1000):
        text = new_job_id()
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
