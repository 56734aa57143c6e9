"""RabbitMQ cannot commit a step's completion with the release of the next steps: a workflow is
refused with a clear error."""

from __future__ import annotations

import pytest

from queuey import Producer
from queuey.errors import NotSupportedError
from queuey.workflows import chain, group
from tests.integration.postgres.workflow_app import Count, Fetch, FlowQueues, Sum
from tests.integration.rabbitmq.conftest import Connect

pytestmark = pytest.mark.rabbitmq


async def test_a_workflow_is_refused_with_a_clear_error(connect: Connect) -> None:
    backend = await connect()
    producer = await Producer.create(FlowQueues, backend)
    flows = [
        chain(Fetch(url="a"), Count.from_page),
        group(Count(text="a"), Count(text="b")).then(Sum.from_counts),
    ]
    for flow in flows:
        with pytest.raises(NotSupportedError, match="RabbitMqBackend cannot run workflows"):
            await producer.enqueue_workflow(flow)
