"""Concepts: the topic face, declared in code and run in memory."""

from __future__ import annotations

import asyncio
from typing import Any

from queuey import MemoryBackend
from queuey.testing import run_until_idle
from queuey.topics import App, MessageContext, QueuesConfig

# --8<-- [start:app]
app = App(
    QueuesConfig(
        prefix="shop",
        max_attempts=3,
        retry_backoff_secs=1,  # 1 s, then 2 s, then failed
        subscribe={"order.paid": ["fulfil_order", "notify_ops"]},
    )
)
handled: list[str] = []


@app.function
async def fulfil_order(payload: dict[str, Any], context: MessageContext) -> None:
    handled.append(f"fulfil {payload['order']} (attempt {context.attempts})")


@app.function
def notify_ops(payload: dict[str, Any]) -> None:  # a plain function runs in a thread
    handled.append(f"notify {payload['order']}")


async def main() -> None:
    backend = MemoryBackend()
    publication = await app.publisher(backend).publish("order.paid", {"order": 42})
    print(publication.delivered)  # 2: one message per subscriber
    await run_until_idle(app.subscriber(backend), backend)
    print(sorted(handled))  # ['fulfil 42 (attempt 1)', 'notify 42']
    # --8<-- [end:app]
    assert publication.delivered == 2
    assert sorted(handled) == ["fulfil 42 (attempt 1)", "notify 42"]


if __name__ == "__main__":
    asyncio.run(main())
