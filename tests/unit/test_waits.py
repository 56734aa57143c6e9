"""``first_of``, the one "wait for the first of these" of the runtime, backends and dashboard:
it returns with the first, and leaves no other wait pending (cancelled and awaited)."""

from __future__ import annotations

import asyncio
import time

import pytest

from queuey._waits import first_of


async def test_it_returns_with_the_first_and_leaves_nothing_pending() -> None:
    first, never = asyncio.Event(), asyncio.Event()
    pending = asyncio.ensure_future(never.wait())
    asyncio.get_running_loop().call_later(0.05, first.set)
    async with asyncio.timeout(5):
        await first_of(first.wait(), pending)
    assert first.is_set() and pending.done() and pending.cancelled()


async def test_a_failing_wait_ends_it_without_raising_or_an_unretrieved_error() -> None:
    async def fails() -> None:
        raise RuntimeError("boom")

    slow = asyncio.ensure_future(asyncio.sleep(30))
    async with asyncio.timeout(5):
        await first_of(fails(), slow)
    assert slow.cancelled()


async def test_a_timeout_ends_it_and_cancels_every_wait() -> None:
    waits = [asyncio.ensure_future(asyncio.sleep(30)) for _ in range(2)]
    began = time.monotonic()
    await first_of(*waits, timeout=0.05)
    assert time.monotonic() - began < 5
    assert all(wait.cancelled() for wait in waits)


async def test_cancelling_the_caller_cancels_every_wait() -> None:
    waits = [asyncio.ensure_future(asyncio.sleep(30)) for _ in range(2)]
    task = asyncio.create_task(first_of(*waits))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert all(wait.cancelled() for wait in waits)
