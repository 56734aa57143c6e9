"""The example app's functions: plain Python, async or not.

A function takes the payload, or the payload and a ``MessageContext``. Raising fails this
subscriber's message only (it is retried with backoff); the other subscribers are unaffected.
Messages are delivered at least once, so a function should be safe to run twice.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from queuey.topics import MessageContext

log = logging.getLogger("shop")


async def send_welcome(payload: Any, context: MessageContext) -> None:
    """Welcome a new user (async: runs on the event loop)."""
    await asyncio.sleep(0)  # stands in for an HTTP call to the mail provider
    log.warning("welcome mail to user %s (message %s)", payload.get("user"), context.message_id)


def fulfil_order(payload: Any) -> None:
    """Hand an order to the warehouse (plain: runs in a thread, never on the loop)."""
    if "order" not in payload:
        raise ValueError("a paid order needs an `order` id")
    log.warning("fulfilling order %s", payload["order"])


def notify_ops(payload: Any, context: MessageContext) -> None:
    """Tell the ops channel; knows how often it was tried."""
    log.warning(
        "ops: order %s paid (attempt %d, published by %r)",
        payload.get("order"),
        context.attempts,
        context.published_by or "the app",
    )
