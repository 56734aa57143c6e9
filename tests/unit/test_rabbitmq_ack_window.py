"""``AckWindow`` on fake messages: in-order acks share one ``basic.ack(multiple)``, and no
multiple ack ever covers a delivery that is still being handled."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from queuey.backends.rabbitmq._acks import AckWindow
from queuey.backends.rabbitmq._inbound import Inbound


class FakeMessage:
    """Records the acks sent for it into a shared log as ``(tag, multiple)``."""

    def __init__(self, tag: int, log: list[tuple[int, bool]]) -> None:
        self.delivery_tag = tag
        self.log = log

    async def ack(self, multiple: bool = False) -> None:
        self.log.append((self.delivery_tag, multiple))


def later(seconds: float = 5.0) -> float:
    """A deadline ``seconds`` from now, in event-loop time."""
    return asyncio.get_running_loop().time() + seconds


def received(window: AckWindow, count: int) -> tuple[list[Any], list[tuple[int, bool]]]:
    log: list[tuple[int, bool]] = []
    messages = [FakeMessage(tag, log) for tag in range(1, count + 1)]
    for message in messages:
        window.received(cast(Inbound, message))
    return messages, log


async def test_acks_in_delivery_order_go_out_as_one_multiple_ack() -> None:
    window = AckWindow()
    messages, log = received(window, 5)
    await asyncio.gather(*(window.ack(m, later()) for m in messages))
    assert log == [(5, True)]


async def test_a_delivery_still_handled_is_never_covered_by_a_multiple_ack() -> None:
    window = AckWindow()
    messages, log = received(window, 4)
    await asyncio.gather(*(window.ack(m, later()) for m in messages[1:]))  # tag 1 is still running
    assert sorted(log) == [(2, False), (3, False), (4, False)]
    await window.ack(messages[0], later())
    assert log[-1] == (1, True)  # covers only tag 1: 2..4 were acked already


async def test_deliveries_settled_on_their_own_do_not_break_the_prefix() -> None:
    window = AckWindow()
    messages, log = received(window, 3)
    window.settled(messages[1])  # e.g. nacked back to the queue at shutdown
    await asyncio.gather(window.ack(messages[0], later()), window.ack(messages[2], later()))
    assert log == [(3, True)]


async def test_an_untracked_message_is_acked_on_its_own() -> None:
    window = AckWindow()
    log: list[tuple[int, bool]] = []
    await window.ack(cast(Inbound, FakeMessage(9, log)), later())
    assert log == [(9, False)]


class StuckMessage(FakeMessage):
    """A message whose ack frame never goes out (a socket that no longer drains)."""

    async def ack(self, multiple: bool = False) -> None:
        await asyncio.Event().wait()


async def test_acks_not_sent_by_their_deadline_fail_with_a_timeout_together() -> None:
    window = AckWindow()
    log: list[tuple[int, bool]] = []
    messages = [StuckMessage(tag, log) for tag in (1, 2, 3)]
    for message in messages:
        window.received(cast(Inbound, message))
    loop = asyncio.get_running_loop()
    began = loop.time()
    results = await asyncio.gather(
        *(window.ack(cast(Inbound, m), later(0.2)) for m in messages),
        return_exceptions=True,
    )
    assert all(isinstance(result, TimeoutError) for result in results)
    assert loop.time() - began < 2.0  # bounded by the deadline, not by the stuck frame


async def test_an_ack_whose_settle_was_cancelled_while_it_waited_is_still_sent_once() -> None:
    """The handler ran and its ack joined the window; the settle awaiting it is cancelled
    (a forced shutdown) before the flush. The ack still goes out, once, and marking the
    delivery settled afterwards does not drop it or send it again."""
    window = AckWindow()
    messages, log = received(window, 2)
    waiting = asyncio.create_task(window.ack(messages[0], later()))
    await asyncio.sleep(0)  # its ack is in the window, the flush not run yet
    waiting.cancel()
    window.settled(messages[0])  # what the delivery's settle does on its way out
    await window.ack(messages[1], later())
    assert log == [(2, True)]


async def test_a_long_window_flushes_each_prefix_once_and_keeps_nothing() -> None:
    """Hundreds of deliveries, acked in rounds, out of order within each round: every ack goes
    out exactly once (multiple acks cover disjoint prefixes) and the window ends empty."""
    window = AckWindow()
    messages, log = received(window, 600)
    for start in range(0, 600, 100):
        batch = messages[start : start + 100]
        await asyncio.gather(*(window.ack(m, later()) for m in reversed(batch)))
    covered: list[int] = []
    previous = 0
    for tag, multiple in log:
        covered.extend(range(previous + 1, tag + 1) if multiple else [tag])
        previous = max(previous, tag) if multiple else previous
    assert sorted(covered) == list(range(1, 601))
    assert not window._tags and not window._order and not window._waiting
