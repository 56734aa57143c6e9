"""Concepts: what a handler's return or exception does to its job (in memory)."""

from __future__ import annotations

import asyncio

from queuey import (
    Defer,
    Fatal,
    Job,
    JobContext,
    MemoryBackend,
    Producer,
    Queue,
    QueueSet,
    Retry,
    RetryPolicy,
    Worker,
)
from queuey.testing import run_until_idle


class Billing(QueueSet, prefix="billing"):
    charges = Queue(retry=RetryPolicy.exponential(max_attempts=3, base="1s", max="1m"))


class Charge(Job[Billing], queue=Billing.charges):
    account: str
    cents: int


# --8<-- [start:policies]
EXPONENTIAL = RetryPolicy.exponential(max_attempts=5, base="1s", factor=2, max="5m")  # jitter on
FIXED = RetryPolicy.fixed(max_attempts=3, delay="10s")
NEVER = RetryPolicy.none()  # the first failure dead-letters
# --8<-- [end:policies]


# --8<-- [start:handler]
def build_worker(backend: MemoryBackend, seen: list[str]) -> Worker[Billing]:
    worker = Worker(Billing, backend, job_timeout="30s")

    @worker.handler(Charge)
    async def charge(job: Charge, ctx: JobContext) -> None:
        seen.append(f"{job.account} attempt {ctx.attempt} deferrals {ctx.deferrals}")
        if job.cents <= 0:
            raise Fatal(f"nothing to charge: {job.cents}")  # dead letter now, no retry
        if job.account == "locked" and ctx.deferrals == 0:
            raise Defer("5s", "account locked")  # back in 5 s, top priority, no attempt spent
        if job.account == "flaky" and not ctx.is_last_attempt:
            raise Retry("gateway timeout")  # the retry policy decides: backoff, then retry
        # returning acks the job

    return worker


# --8<-- [end:handler]


async def main() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(Billing, backend)
    for account, cents in [("ok", 100), ("free", 0), ("locked", 50), ("flaky", 70)]:
        await producer.enqueue(Charge(account=account, cents=cents))
    seen: list[str] = []
    await run_until_idle(build_worker(backend, seen), backend)
    for line in sorted(seen):
        print(line)
    dead = [reason for _, reason in backend.dead_letters("billing.charges")]
    print(dead)  # ['fatal error: nothing to charge: 0']
    assert sorted(seen) == [
        "flaky attempt 1 deferrals 0",
        "flaky attempt 2 deferrals 0",
        "flaky attempt 3 deferrals 0",
        "free attempt 1 deferrals 0",
        "locked attempt 1 deferrals 0",
        "locked attempt 1 deferrals 1",
        "ok attempt 1 deferrals 0",
    ]
    assert dead == ["fatal error: nothing to charge: 0"]
    assert (EXPONENTIAL.max_attempts, FIXED.max_attempts, NEVER.max_attempts) == (5, 3, 1)


if __name__ == "__main__":
    asyncio.run(main())
