"""The dashboard's job page shows every failed attempt's error of a job a real worker ran:
type, message (as text, never markup), when, which worker, and the traceback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from queuey import Job, JobContext, Producer, Queue, QueueSet, RetryPolicy, Worker
from queuey.backends.postgres import PgDashboardStore, PostgresBackend
from tests.helpers import run_until
from tests.integration.postgres.dashboard_helpers import ADMIN_KEY, BASE, client, dashboard, sign_in

pytestmark = pytest.mark.postgres


class PageQueues(QueueSet, prefix="page"):
    orders = Queue(retry=RetryPolicy.fixed(2, "10ms"))


class Charge(Job[PageQueues], queue=PageQueues.orders, name="page.Charge"):
    order: dict[str, Any]


def read_price(order: dict[str, Any]) -> Any:
    return order["price"]


@pytest.fixture
async def store(database_url: str, pg_schema: str) -> AsyncIterator[PgDashboardStore]:
    async with PgDashboardStore(database_url, schema=pg_schema, topic_channel="shop_queue") as s:
        yield s


async def test_the_job_page_shows_each_attempt_error_with_its_traceback(
    store: PgDashboardStore, database_url: str, pg_schema: str
) -> None:
    backend = await PostgresBackend.connect(database_url, schema=pg_schema, poll_interval="1s")
    try:
        producer = await Producer.create(PageQueues, backend)
        worker = Worker(PageQueues, backend)

        @worker.handler(Charge)
        async def charge(job: Charge, ctx: JobContext) -> None:
            if ctx.attempt == 1:
                read_price(job.order)
            raise ValueError("<b>card</b> declined")

        job_id = await producer.enqueue(Charge(order={"n": 1}))
        await run_until(worker, lambda: worker.stats["page.orders"].dead == 1)
    finally:
        await backend.close()
    async with client(dashboard(store)) as http:
        await sign_in(http, ADMIN_KEY)
        page = await http.get(f"{BASE}/jobs/{job_id}")
    assert page.status_code == 200
    text = page.text
    assert 'id="attempt-errors"' in text
    assert text.index("Attempt 1") < text.index("Attempt 2")
    assert "KeyError: &#39;price&#39;" in text
    assert "ValueError: &lt;b&gt;card&lt;/b&gt; declined" in text and "<b>card" not in text
    assert text.count("<summary>Traceback</summary>") == 2
    assert "in read_price" in text
    assert backend.owner in text  # the worker that ran each attempt
    assert "earlier attempts&#39; errors are not stored" not in text
