"""``queuey.sync.Producer.enqueue_workflow``: the blocking twin of the async one stores every
step at once through ``ThreadedBackend`` and hands back the typed handle of the last step; a
synchronous backend that cannot run workflows refuses before storing anything."""

from __future__ import annotations

import pytest

from queuey import Job, MemoryBackend, NotSupportedError, Queue, QueueSet, sync
from queuey.backends.postgres import SyncPostgresBackend
from queuey.batches import BatchProgress, batch
from queuey.workflows import chain


class Flow(QueueSet, prefix="syncflow"):
    steps = Queue()


class Start(Job[Flow, int], queue=Flow.steps, name="syncflow.Start"):
    n: int


class Double(Job[Flow, int], queue=Flow.steps, name="syncflow.Double"):
    n: int

    @classmethod
    def from_start(cls, n: int) -> Double:
        return cls(n=n)


def test_a_workflow_enqueued_from_sync_code_stores_its_steps_at_once() -> None:
    with sync.ThreadedBackend(MemoryBackend()) as backend:
        producer = sync.Producer.create(Flow, backend)
        handle = producer.enqueue_workflow(chain(Start(n=2), Double.from_start))
        last = producer.job(handle)
        assert last is not None and last.state == "waiting"  # until Start has ended
        assert handle.job_id == str(handle)


def test_a_workflow_is_shown_and_cancelled_from_sync_code() -> None:
    with sync.ThreadedBackend(MemoryBackend()) as backend:
        producer = sync.Producer.create(Flow, backend)
        handle = producer.enqueue_workflow(chain(Start(n=2), Double.from_start))
        assert handle.workflow_id is not None
        info = producer.workflow(handle.workflow_id)
        assert info is not None and [s.state for s in info.steps] == ["pending", "waiting"]
        done = producer.cancel_workflow(handle)  # by a step's job id
        assert (done.cancelled, done.requested) == (2, 0)
        ended = producer.workflow(handle)
        assert ended is not None and ended.state == "cancelled"


def test_a_sync_backend_without_workflows_refuses_before_storing() -> None:
    backend = SyncPostgresBackend("postgresql://nobody@127.0.0.1:1/none")  # never opened
    producer = sync.Producer.undeclared(Flow, backend)
    with pytest.raises(NotSupportedError, match="SyncPostgresBackend cannot run workflows"):
        producer.enqueue_workflow(chain(Start(n=2), Double.from_start))
    with pytest.raises(NotSupportedError, match="SyncPostgresBackend cannot run workflows"):
        producer.cancel_workflow("0d6c9c7e-7b43-4a5e-9d0e-8f7b6a5c4d3e")


class Tally(Job[Flow], queue=Flow.steps, name="syncflow.Tally"):
    done: int

    @classmethod
    def from_batch(cls, progress: BatchProgress) -> Tally:
        return cls(done=progress.done)


def test_a_batch_enqueued_from_sync_code_reports_its_progress() -> None:
    with sync.ThreadedBackend(MemoryBackend()) as backend:
        producer = sync.Producer.create(Flow, backend)
        handle = producer.enqueue_batch(batch(Start(n=1), Start(n=2)).on_complete(Tally.from_batch))
        assert len(handle.job_ids) == 2
        added = producer.batch(handle.batch_id).add(Start(n=3))
        progress = handle.progress()
        assert (progress.total, progress.pending, progress.done) == (3, 3, 0)
        assert len(added) == 1 and producer.job(added[0]) is not None


def test_a_sync_backend_without_batches_refuses() -> None:
    backend = SyncPostgresBackend("postgresql://nobody@127.0.0.1:1/none")  # never opened
    producer = sync.Producer.undeclared(Flow, backend)
    with pytest.raises(NotSupportedError, match="SyncPostgresBackend cannot run batches"):
        producer.enqueue_batch(batch(Start(n=2)))
