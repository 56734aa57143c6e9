"""``GET <base>/jobs/{id}``: off by default, behind the access grammar, and the job's state,
progress and result as JSON (memory backend, through httpx's ASGI transport)."""

from __future__ import annotations

import asyncio
import uuid

from pydantic import BaseModel
from starlette.applications import Starlette

from queuey import Job, JobContext, MemoryBackend, Producer, Queue, QueueSet, Worker
from queuey.http import AccessPolicy, publish_app
from queuey.topics.config import QueuesConfig
from tests.unit.http.http_fakes import RecordingPublisher, bearer, client, http_config, token

OPS = bearer(token(sub="olga", roles=["ops"]))
MEMBER = bearer(token(sub="mo", roles=["member"]))


class Thumb(BaseModel):
    url: str


class WebQueues(QueueSet, prefix="web"):
    work = Queue()


class Render(Job[WebQueues, Thumb], queue=WebQueues.work, name="web.Render"):
    page: str


def app(backend: MemoryBackend, jobs: str | None) -> Starlette:
    access = None if jobs is None else AccessPolicy.parse(jobs)
    return publish_app(
        http_config(),
        RecordingPublisher(),
        AccessPolicy.parse("public"),
        jobs=backend,
        jobs_access=access,
    )


async def test_the_route_is_off_by_default_and_behind_the_access_grammar() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(WebQueues, backend)
    handle = await producer.enqueue(Render(page="home"))
    assert QueuesConfig().jobs_access() == "private"
    for closed in (None, "private"):
        async with client(app(backend, closed)) as http:
            answer = await http.get(f"/jobs/{handle.job_id}", headers=OPS)
        assert answer.status_code == 404
    async with client(app(backend, "role:ops")) as http:
        anonymous = await http.get(f"/jobs/{handle.job_id}")
        member = await http.get(f"/jobs/{handle.job_id}", headers=MEMBER)
        ops = await http.get(f"/jobs/{handle.job_id}", headers=OPS)
    assert (anonymous.status_code, member.status_code, ops.status_code) == (401, 403, 200)
    assert ops.json()["state"] == "pending" and ops.json()["result"] is None


async def test_a_client_polls_a_job_to_its_result() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(WebQueues, backend)
    handle = await producer.enqueue(Render(page="about"))
    worker = Worker(WebQueues, backend)
    release = asyncio.Event()

    @worker.handler(Render)
    async def render(job: Render, ctx: JobContext) -> Thumb:
        ctx.progress(1, total=2, note="rendering")
        await release.wait()
        return Thumb(url=f"/{job.page}.png")

    async with client(app(backend, "public")) as http:
        running = asyncio.create_task(worker.run())
        while (await backend.job(handle.job_id)).state != "running":  # type: ignore[union-attr]
            await asyncio.sleep(0.01)
        midway = (await http.get(f"/jobs/{handle.job_id}")).json()
        release.set()
        await handle.result(timeout=10)
        worker.shutdown()
        await running
        done = await http.get(f"/jobs/{handle.job_id}")
        unknown = await http.get(f"/jobs/{uuid.uuid4()}")
        malformed = await http.get("/jobs/not-a-uuid")
    assert midway["state"] == "running"
    assert midway["progress"] == {"fraction": 0.5, "done": 1, "total": 2, "note": "rendering"}
    body = done.json()
    assert (done.status_code, body["state"], body["result"]) == (200, "done", {"url": "/about.png"})
    assert set(body) == {
        "id",
        "state",
        "queue",
        "job_type",
        "attempts",
        "due_at",
        "progress",
        "result",
        "last_error",
    }
    assert done.headers["cache-control"] == "no-store"
    assert (unknown.status_code, malformed.status_code) == (404, 404)


async def test_openapi_describes_the_jobs_route_with_its_own_access() -> None:
    backend = MemoryBackend()
    producer = await Producer.create(WebQueues, backend)
    handle = await producer.enqueue(Render(page="home"))
    base = http_config(base="/api")
    publishing = AccessPolicy.parse("public")
    closed = publish_app(base, RecordingPublisher(), publishing, jobs=backend)
    opened = publish_app(
        base,
        RecordingPublisher(),
        publishing,
        jobs=backend,
        jobs_access=AccessPolicy.parse("role:ops"),
    )
    only_jobs = publish_app(
        base,
        RecordingPublisher(),
        AccessPolicy.parse("private"),
        jobs=backend,
        jobs_access=AccessPolicy.parse("authenticated"),
    )
    async with client(closed) as http:
        without = (await http.get("/api/openapi.json")).json()
    async with client(opened) as http:
        document = (await http.get("/api/openapi.json")).json()
        answer = (await http.get(f"/api/jobs/{handle.job_id}", headers=OPS)).json()
    async with client(only_jobs) as http:
        jobs_only = (await http.get("/api/openapi.json")).json()
    assert (
        "/api/jobs/{job_id}" not in without["paths"]
        and "Job" not in without["components"]["schemas"]
    )
    operation = document["paths"]["/api/jobs/{job_id}"]["get"]
    assert set(document["paths"]) == {"/api/queues/{topic}", "/api/jobs/{job_id}"}
    assert [p["name"] for p in operation["parameters"]] == ["job_id"]
    assert set(operation["responses"]) == {"200", "401", "403", "404", "500", "503"}
    assert "`role:ops`" in operation["description"]
    # The publish route is public; reading a job needs a credential (no anonymous {}).
    assert document["security"] == [{"bearer": []}, {"apiKey": []}, {}]
    assert operation["security"] == [{"bearer": []}, {"apiKey": []}]
    schema = document["components"]["schemas"]["Job"]
    assert operation["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/Job"
    }
    # The schema names exactly the fields the route answers with, and every state.
    assert set(schema["required"]) == set(schema["properties"]) == set(answer)
    assert schema["properties"]["state"]["enum"] == [
        "pending",
        "running",
        "done",
        "failed",
        "cancelled",
        "waiting",
    ]
    assert answer["state"] in schema["properties"]["state"]["enum"]
    # Publishing private, jobs open: the document is served and describes the jobs route only.
    assert set(jobs_only["paths"]) == {"/api/jobs/{job_id}"}
    assert jobs_only["security"] == []
