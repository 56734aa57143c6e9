"""The parameters of ``start_workflow``: a workflow's steps and edges as column arrays."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from queuey.backends.postgres._arrays import number_array, text_array
from queuey.backends.steps import StepEdge, StepRow

__all__ = ["workflow_params"]


def workflow_params(
    workflow_id: str, steps: Sequence[StepRow], edges: Sequence[StepEdge], channel: str
) -> dict[str, Any]:
    """The ``start_workflow`` parameters for ``steps`` and ``edges`` of ``workflow_id``."""
    return {
        "workflow": workflow_id,
        "ids": text_array([s.job_id for s in steps]),
        "queues": text_array([s.queue for s in steps]),
        "job_types": text_array([s.job_type for s in steps]),
        "priorities": number_array([s.priority for s in steps]),
        "enqueued_at_ms": number_array([s.enqueued_at_ms for s in steps]),
        "parents": number_array([s.parents for s in steps]),
        "payloads": json.dumps([s.payload for s in steps], separators=(",", ":")),
        "steps": json.dumps([s.step for s in steps], separators=(",", ":")),
        "headers": json.dumps([s.headers for s in steps], separators=(",", ":")),
        "edge_parents": text_array([e.parent for e in edges]),
        "edge_children": text_array([e.child for e in edges]),
        "edge_positions": number_array([e.position for e in edges]),
        "edge_policies": text_array([e.policy for e in edges]),
        "channel": channel,
    }
