"""How-to: unique jobs (in memory; the same on PostgreSQL)."""

from __future__ import annotations

import asyncio

from queuey import Job, MemoryBackend, Producer, Queue, QueueSet, Unique


# --8<-- [start:declare]
class Sync(QueueSet, prefix="billing"):
    accounts = Queue()


class SyncAccount(Job[Sync], queue=Sync.accounts, unique=Unique(by=("account_id",))):
    account_id: int


class Refresh(  # debounce: at most one pending, carrying the latest payload and due time
    Job[Sync], queue=Sync.accounts, unique=Unique(by=("page",), on_conflict="replace")
):
    page: str
    reason: str = ""


class DailyDigest(  # at most once per day, even after it ran or failed
    Job[Sync],
    queue=Sync.accounts,
    unique=Unique(by=("user",), states=("pending", "running", "done", "failed"), period="24h"),
):
    user: str


# --8<-- [end:declare]


async def main() -> None:
    # --8<-- [start:enqueue]
    backend = MemoryBackend()  # or a PostgresBackend
    producer = await Producer.create(Sync, backend)
    first = await producer.enqueue(SyncAccount(account_id=7))
    again = await producer.enqueue(SyncAccount(account_id=7))
    assert first.inserted and not again.inserted and again == first  # the same job id

    edit1 = await producer.enqueue_after(Refresh(page="/", reason="edit 1"), "30s")
    edit2 = await producer.enqueue_after(Refresh(page="/", reason="edit 2"), "30s")
    assert edit2 == edit1  # one job, now carrying "edit 2", due 30 s from the second call
    assert (edit1.outcome, edit2.outcome) == ("inserted", "replaced")

    results = await producer.enqueue_many([DailyDigest(user="ada"), DailyDigest(user="ada")])
    print([result.inserted for result in results])  # [True, False]
    # --8<-- [end:enqueue]
    assert [result.inserted for result in results] == [True, False]
    info = await producer.job(edit1)
    assert info is not None and info.payload["reason"] == "edit 2"


if __name__ == "__main__":
    asyncio.run(main())
