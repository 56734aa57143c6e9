"""Workflow steps in memory: what each waiting step still needs, and what ending a step
releases or fails, with the semantics of the PostgreSQL statements (migration 0014).

A step waits until each parent has ended. A parent that succeeds gives its result at its
position; one that fails for good gives its error to a ``partial`` child and fails a ``fail``
child, which fails its own ``fail`` children in turn (transitively).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from queuey.backends.base import JobState
from queuey.backends.steps import ADDED_BY_HEADER, FAN_OUT_KEY, StepEdge, StepRow

__all__ = ["Released", "Steps"]


@dataclass
class _Waiting:
    row: StepRow
    left: int
    inputs: dict[int, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Released:
    """What ending one step changed: steps due now (row and payload) and steps failed (id,
    row and error)."""

    due: list[tuple[StepRow, Any]]
    failed: list[tuple[StepRow, str]]


class Steps:
    """The waiting steps of every workflow of one memory backend."""

    def __init__(self) -> None:
        self._waiting: dict[str, _Waiting] = {}
        self._children: dict[str, list[StepEdge]] = {}
        self.flows: dict[str, list[StepRow]] = {}
        """Every workflow's steps, in the order they were enqueued, by workflow id."""
        self.flow_of: dict[str, str] = {}
        """The workflow id of each step, by its job id."""
        self.on_end: Callable[[str, JobState, str | None, str | None], None] | None = None
        """Called by ``job_ended`` for a step that has steps waiting for it (the backend's)."""

    def job_ended(
        self, job_id: str, state: JobState, result: str | None, error: str | None
    ) -> None:
        """Job ``job_id`` ended in ``state``: ``on_end`` when steps wait for it."""
        if self.on_end is not None and (job_id in self._children or _fan_out(result)):
            self.on_end(job_id, state, result, error)

    def feeds(self, job_id: str) -> bool:
        """Whether step ``job_id`` has steps waiting for it."""
        return job_id in self._children

    def withdraw(self, job_id: str) -> None:
        """Waiting step ``job_id`` was cancelled: its parents' ends no longer reach it."""
        self._waiting.pop(job_id, None)

    def start(self, workflow_id: str, rows: Sequence[StepRow], edges: Sequence[StepEdge]) -> None:
        """Remember workflow ``workflow_id``'s ``rows``, those that wait (with parents) and the
        ``edges`` to them."""
        self.flows.setdefault(workflow_id, []).extend(rows)
        self.flow_of.update((row.job_id, workflow_id) for row in rows)
        for row in rows:
            if row.parents:
                self._waiting[row.job_id] = _Waiting(row, row.parents)
        for edge in edges:
            self._children.setdefault(edge.parent, []).append(edge)

    def ended(self, job_id: str, result: str | None, error: str | None) -> Released:
        """Step ``job_id`` ended: succeeded with ``result`` (JSON text) when ``error`` is
        ``None``, else failed for good with ``error``."""
        released = Released([], [])
        if error is None:
            value = None if result is None else json.loads(result)
            spawned = _fan_out(result)
            if spawned is not None:
                self._spawn(job_id, spawned, released)
                return released
            for edge in self._children.pop(job_id, []):
                self._feed(edge, value, released)
            return released
        self._fail(job_id, job_id, error, released)
        return released

    def _spawn(self, job_id: str, spawned: list[dict[str, Any]], released: Released) -> None:
        """Step ``job_id`` fanned out (as ``ack_results`` does): its ``spawned`` jobs are due
        now in its workflow, and each step after it waits for them instead, their results in
        order in place of its own."""
        flow = self.flow_of.get(job_id)
        mine = [row for row in self.flows.get(flow or "", []) if row.job_id == job_id]
        headers = dict(mine[0].headers) if mine else {}  # its workflow's id and trace context
        headers[ADDED_BY_HEADER] = job_id
        rows = [
            StepRow(
                s["id"],
                s["queue"],
                s["job_type"],
                0,
                s["payload"],
                s.get("at", 0),
                0,
                None,
                headers,
            )
            for s in spawned
        ]
        if flow is not None:
            self.flows[flow].extend(rows)
            self.flow_of.update((row.job_id, flow) for row in rows)
        released.due.extend((row, row.payload) for row in rows)
        for edge in self._children.pop(job_id, []):
            child = self._waiting.get(edge.child)
            if child is None:
                continue
            child.left += len(rows) - 1
            child.row = self._rewired(flow, child.row, job_id, [row.job_id for row in rows])
            for at, row in enumerate(rows):
                spawned_edge = StepEdge(row.job_id, edge.child, at, edge.policy)
                self._children.setdefault(row.job_id, []).append(spawned_edge)
            if child.left == 0:  # fanned out to no job: its successor runs with none
                self._release(edge.child, child, released)

    def _rewired(self, flow: str | None, row: StepRow, parent: str, added: list[str]) -> StepRow:
        """``row`` with ``added`` in place of ``parent`` among the parents its step names (as
        ``ack_results`` rewrites them), also in its workflow's rows."""
        if row.step is None:
            return row
        named = row.step.get("parents") or []
        parents = [p for name in named for p in (added if name == parent else [name])]
        new = dataclasses.replace(row, step={**row.step, "parents": parents})
        steps = self.flows.get(flow or "", [])
        steps[:] = [new if r.job_id == row.job_id else r for r in steps]
        return new

    def _fail(self, job_id: str, cause: str, error: str, released: Released) -> None:
        """``job_id`` will never succeed (``cause`` failed with ``error``)."""
        shown = error if job_id == cause else f"step {cause} failed: {error}"
        failure = {"queuey_failed": {"job_id": job_id, "error": shown}}
        for edge in self._children.pop(job_id, []):
            if edge.policy == "partial":
                self._feed(edge, failure, released)
                continue
            child = self._waiting.pop(edge.child, None)
            if child is not None:
                message = f"workflow failed: step {cause} failed: {error}"
                released.failed.append((child.row, message))
                self._fail(edge.child, cause, error, released)

    def _feed(self, edge: StepEdge, value: Any, released: Released) -> None:
        child = self._waiting.get(edge.child)
        if child is None:
            return  # failed already
        child.inputs[edge.position] = value
        child.left -= 1
        if child.left == 0:
            self._release(edge.child, child, released)

    def _release(self, job_id: str, child: _Waiting, released: Released) -> None:
        del self._waiting[job_id]
        inputs = [child.inputs[at] for at in sorted(child.inputs)]
        payload = {"__queuey_step__": {**(child.row.step or {}), "inputs": inputs}}
        released.due.append((child.row, payload))


def _fan_out(result: str | None) -> list[dict[str, Any]] | None:
    """The jobs a fan-out result (``queuey.fan_out``) adds, else ``None``."""
    if result is None or FAN_OUT_KEY not in result:
        return None
    value = json.loads(result)
    found = value.get(FAN_OUT_KEY) if isinstance(value, dict) else None
    return found if isinstance(found, list) else None
