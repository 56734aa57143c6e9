"""How-to: typed workflows on PostgreSQL (a chain, a group with a fan-in, both failure
policies)."""

from __future__ import annotations

import asyncio
import os

from pydantic import BaseModel

from queuey import Job, JobContext, JobFailedError, Producer, Queue, QueueSet, RetryPolicy, Worker
from queuey.backends.postgres import PostgresBackend
from queuey.workflows import StepFailed, chain, group

DATABASE_URL = os.environ.get(
    "QUEUEY_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/postgres"
)
SCHEMA = os.environ.get("QUEUEY_SCHEMA", "queuey")


# --8<-- [start:declare]
class Crawl(QueueSet, prefix="crawl"):
    pages = Queue(retry=RetryPolicy.none())


class Page(BaseModel):
    url: str
    body: str


class Fetch(Job[Crawl, Page], queue=Crawl.pages):  # its handler returns a Page
    url: str


class CountWords(Job[Crawl, int], queue=Crawl.pages):
    text: str

    @classmethod
    def from_page(cls, page: Page) -> CountWords:  # built from Fetch's result
        return cls(text=page.body)


class Total(Job[Crawl, int], queue=Crawl.pages):
    counts: list[int]
    failed: int = 0

    @classmethod
    def from_counts(cls, counts: list[int]) -> Total:  # every member succeeded
        return cls(counts=counts)

    @classmethod
    def from_some(cls, counts: list[int | StepFailed]) -> Total:  # failures included
        ok = [c for c in counts if isinstance(c, int)]
        return cls(counts=ok, failed=len(counts) - len(ok))


# --8<-- [end:declare]


def make_worker(backend: PostgresBackend) -> Worker[Crawl]:
    worker = Worker(Crawl, backend)

    @worker.handler(Fetch)
    async def fetch(job: Fetch, ctx: JobContext) -> Page:
        if "missing" in job.url:
            raise LookupError(f"{job.url}: 404")
        return Page(url=job.url, body=f"the page at {job.url}")

    @worker.handler(CountWords)
    async def count(job: CountWords, ctx: JobContext) -> int:
        return len(job.text.split())

    @worker.handler(Total)
    async def total(job: Total, ctx: JobContext) -> int:
        return sum(job.counts)

    return worker


async def main() -> None:
    async with await PostgresBackend.connect(DATABASE_URL, schema=SCHEMA) as backend:
        worker = make_worker(backend)
        running = asyncio.create_task(worker.run())
        producer = await Producer.create(Crawl, backend)
        # --8<-- [start:run]
        one = chain(Fetch(url="/a"), CountWords.from_page)  # a Workflow[int]
        handle = await producer.enqueue_workflow(one)  # a JobHandle[int] of its last step
        print(await handle.result(timeout="30s"))  # 4 ("the page at /a")

        urls = ["/a", "/b/c", "/missing"]
        members = [chain(Fetch(url=u), CountWords.from_page) for u in urls]
        strict = await producer.enqueue_workflow(group(*members).then(Total.from_counts))
        try:
            await strict.result(timeout="30s")
        except JobFailedError as exc:  # a member failed: the workflow failed, Total never ran
            print(exc.last_error)  # workflow failed: step ... failed: ... 404

        members = [chain(Fetch(url=u), CountWords.from_page) for u in urls]
        lenient = await producer.enqueue_workflow(group(*members).then_partial(Total.from_some))
        print(await lenient.result(timeout="30s"))  # 8: the two pages found
        # --8<-- [end:run]
        assert await handle.result() == 4
        assert await lenient.result() == 8
        worker.shutdown()
        await running


if __name__ == "__main__":
    asyncio.run(main())
