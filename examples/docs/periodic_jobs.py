"""How-to: periodic jobs, fired by the workers that are given the schedules (in memory)."""

from __future__ import annotations

import asyncio

from queuey import Job, JobContext, MemoryBackend, Queue, QueueSet, Schedule, Worker


# --8<-- [start:schedules]
class Reports(QueueSet, prefix="reports"):
    nightly = Queue()


class Report(Job[Reports], queue=Reports.nightly):
    kind: str


SCHEDULES = [
    # 03:00 every day, Paris time; a worker that was down at 03:00 fires the latest missed slot
    Schedule(name="nightly", cron="0 3 * * *", tz="Europe/Paris", job=Report(kind="daily")),
    # every 2 s; skipped while the previous one is still pending or running
    Schedule(name="ping", every="2s", job=Report(kind="ping"), skip_if_running=True),
]
# --8<-- [end:schedules]


async def main() -> None:
    # --8<-- [start:worker]
    backend = MemoryBackend()  # or a PostgresBackend: every worker process shares the slots
    worker = Worker(Reports, backend, schedules=SCHEDULES)
    pings: list[str] = []

    @worker.handler(Report)
    async def report(job: Report, ctx: JobContext) -> None:
        pings.append(job.kind)
        if len(pings) == 2:
            worker.shutdown()  # a real worker runs until SIGTERM

    await worker.run()
    print(pings)  # ['ping', 'ping']
    # --8<-- [end:worker]
    assert pings == ["ping", "ping"]


if __name__ == "__main__":
    asyncio.run(main())
