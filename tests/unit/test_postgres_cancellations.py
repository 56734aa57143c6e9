"""The lost-lease report of the PostgreSQL heartbeat judges only the runs it saw.

A heartbeat snapshots the held rows, then extends them; a row settled and claimed again by
this process while the statement is in flight is missing from the answer, yet its new run is
held. Such a run began after the heartbeat was sent, so the report leaves it alone."""

from __future__ import annotations

import asyncio
import time

from queuey.backends.postgres._cancel import Cancellations


async def test_a_run_that_began_after_the_heartbeat_was_sent_is_not_reported_lost() -> None:
    cancellations = Cancellations("owner")
    first = cancellations.watch("row")
    sent = time.monotonic()
    cancellations.forget("row")  # the first run settled while the heartbeat was in flight
    await asyncio.sleep(0.01)
    second = cancellations.watch("row")  # ...and the row was claimed here again
    cancellations.lost(["row"], sent)
    assert not first.done() and not second.done()
    assert not cancellations.is_lost("row")


async def test_a_run_the_heartbeat_saw_is_reported_lost() -> None:
    cancellations = Cancellations("owner")
    run = cancellations.watch("row")
    other = cancellations.watch("other")
    await asyncio.sleep(0.01)
    cancellations.lost(["row"], time.monotonic())
    assert run.done() and cancellations.is_lost("row")
    assert not other.done() and not cancellations.is_lost("other")
