"""Workflows: typed steps run in order (a chain) or in parallel with one callback when all have
ended (a group with a fan-in), stored durably by the backend.

```python
class Fetch(Job[AppQueues, Page], queue=AppQueues.web):
    url: str

class Parse(Job[AppQueues, Words], queue=AppQueues.web):
    text: str

    @classmethod
    def from_page(cls, page: Page) -> Parse:  # Page: Fetch's result type
        return cls(text=page.body)

class Total(Job[AppQueues, int], queue=AppQueues.web):
    counts: list[int]

    @classmethod
    def from_words(cls, results: list[Words]) -> Total:
        return cls(counts=[len(w.words) for w in results])

flow = chain(Fetch(url=a), Parse.from_page)                 # a Workflow[Words]
fan = group(flow, chain(Fetch(url=b), Parse.from_page))     # a Group[Words]
handle = await producer.enqueue_workflow(fan.then(Total.from_words))
total = await handle.result()                               # an int
```

A step after the first is built by a classmethod of its job class from its parent's result (a
chain) or from the list of its members' results (a fan-in); ``mypy`` refuses a builder whose
parameter is not its parent's result type. The builder runs in the worker that runs the step,
once every parent has ended. A fan-in's failure policy: ``then`` fails the workflow when a
member fails for good (every step still waiting ends failed, naming the member);
``then_partial`` runs the callback with each failed member's ``StepFailed`` in its place.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, get_type_hints, overload

from pydantic import BaseModel, TypeAdapter

from queuey.backends.steps import FailurePolicy, StepEdge, StepRow
from queuey.backends.workflow_ops import (
    WorkflowCancel,
    WorkflowInfo,
    WorkflowOps,
    WorkflowStep,
    WorkflowSummary,
)
from queuey.errors import ConfigError
from queuey.fan_out import FanOut
from queuey.jobs import Job

__all__ = [
    "FanOut",
    "Group",
    "StepFailed",
    "Workflow",
    "WorkflowCancel",
    "WorkflowInfo",
    "WorkflowOps",
    "WorkflowStep",
    "WorkflowSummary",
    "chain",
    "group",
    "start",
    "step_builder",
]

A = TypeVar("A")
B = TypeVar("B")
R = TypeVar("R")
C = TypeVar("C")
D = TypeVar("D")
T = TypeVar("T")


class StepFailed(BaseModel):
    """A member of a ``then_partial`` fan-in that failed for good, in place of its result.

    Attributes:
        job_id: the failed step's job id.
        error: its last error (the dead letter's reason).
    """

    job_id: str
    error: str | None = None


@dataclass(frozen=True)
class Node:
    """One step: a root ``job``, or a ``job_class`` built by its classmethod ``builder`` from
    its ``parents``' results (``many``: from their list) under ``policy``."""

    job_id: str
    job_class: type[Job[Any, Any]]
    job: Job[Any, Any] | None
    builder: str | None
    many: bool
    parents: tuple[str, ...]
    policy: FailurePolicy


def step_builder(builder: object, what: str) -> tuple[type[Job[Any, Any]], str]:
    """The job class and method name of ``builder``, a classmethod of a job class.

    Raises:
        ConfigError: naming ``builder``, when it is not one.
    """
    owner = getattr(builder, "__self__", None)
    name = getattr(builder, "__name__", None)
    if (
        inspect.ismethod(builder)
        and isinstance(owner, type)
        and issubclass(owner, Job)
        and isinstance(name, str)
        and getattr(owner, name, None) == builder
    ):
        return owner, name
    raise ConfigError(
        f"{what}: {builder!r} is not a classmethod of a job class; build a step with one, "
        "e.g. Parse.from_page (a @classmethod of Parse taking the parent's result)"
    )


class Workflow(Generic[T]):
    """A workflow whose last step's result is a ``T``: enqueue it with
    ``producer.enqueue_workflow``. Built by ``start``, ``chain`` and ``Group.then``."""

    def __init__(self, nodes: tuple[Node, ...]) -> None:
        self.nodes = nodes

    @property
    def last(self) -> Node:
        """The step whose result is the workflow's."""
        return self.nodes[-1]

    def then(self, builder: Callable[[T], Job[Any, B]]) -> Workflow[B]:
        """This workflow followed by the step ``builder`` makes from its result.

        Raises:
            ConfigError: ``builder`` is not a classmethod of a job class.
        """
        job_class, name = step_builder(builder, "then")
        node = Node(_new_id(), job_class, None, name, False, (self.last.job_id,), "fail")
        return Workflow((*self.nodes, node))

    def then_each(
        self: Workflow[FanOut[R]], builder: Callable[[list[R]], Job[Any, B]]
    ) -> Workflow[B]:
        """After a step that fans out (its result type ``FanOut[R]``): the step ``builder``
        makes from the results of the jobs it added, in order, once all have succeeded; one
        that fails for good fails the workflow.

        Raises:
            ConfigError: ``builder`` is not a classmethod of a job class.
        """
        return self._each(builder, "fail")

    def then_each_partial(
        self: Workflow[FanOut[R]], builder: Callable[[list[R | StepFailed]], Job[Any, B]]
    ) -> Workflow[B]:
        """As ``then_each``, run whatever happens: a ``StepFailed`` in place of each added job
        that failed for good.

        Raises:
            ConfigError: ``builder`` is not a classmethod of a job class.
        """
        return self._each(builder, "partial")

    def _each(self, builder: object, policy: FailurePolicy) -> Workflow[Any]:
        what = "then_each" if policy == "fail" else "then_each_partial"
        job_class, name = step_builder(builder, what)
        node = Node(_new_id(), job_class, None, name, True, (self.last.job_id,), policy)
        return Workflow((*self.nodes, node))


class Group(Generic[T]):
    """Members run in parallel, each a job or a workflow whose result is a ``T``; ``then`` or
    ``then_partial`` adds the callback that runs once when all have ended."""

    def __init__(self, members: tuple[Workflow[T], ...]) -> None:
        if not members:
            raise ConfigError("group: give at least one member (a job or a workflow)")
        self.members = members

    def then(self, builder: Callable[[list[T]], Job[Any, B]]) -> Workflow[B]:
        """The fan-in: ``builder`` makes the callback from the members' results, in member
        order, once all have succeeded; a member that fails for good fails the workflow.

        Raises:
            ConfigError: ``builder`` is not a classmethod of a job class.
        """
        return self._fan_in(builder, "fail")

    def then_partial(self, builder: Callable[[list[T | StepFailed]], Job[Any, B]]) -> Workflow[B]:
        """The fan-in that runs whatever happens: ``builder`` gets each member's result, or a
        ``StepFailed`` for a member that failed for good, in member order.

        Raises:
            ConfigError: ``builder`` is not a classmethod of a job class.
        """
        return self._fan_in(builder, "partial")

    def _fan_in(self, builder: object, policy: FailurePolicy) -> Workflow[Any]:
        job_class, name = step_builder(builder, "then" if policy == "fail" else "then_partial")
        parents = tuple(member.last.job_id for member in self.members)
        node = Node(_new_id(), job_class, None, name, True, parents, policy)
        nodes = tuple(n for member in self.members for n in member.nodes)
        return Workflow((*nodes, node))


def start(first: Job[Any, T] | Workflow[T]) -> Workflow[T]:
    """A workflow of the one job ``first`` (a workflow is returned as it is)."""
    if isinstance(first, Workflow):
        return first
    if not isinstance(first, Job):
        raise ConfigError(f"a workflow starts with a job or a workflow, got {first!r}")
    return Workflow((Node(_new_id(), type(first), first, None, False, (), "fail"),))


@overload
def chain(first: Job[Any, A] | Workflow[A], b: Callable[[A], Job[Any, B]], /) -> Workflow[B]: ...
@overload
def chain(
    first: Job[Any, A] | Workflow[A],
    b: Callable[[A], Job[Any, B]],
    c: Callable[[B], Job[Any, C]],
    /,
) -> Workflow[C]: ...
@overload
def chain(
    first: Job[Any, A] | Workflow[A],
    b: Callable[[A], Job[Any, B]],
    c: Callable[[B], Job[Any, C]],
    d: Callable[[C], Job[Any, D]],
    /,
) -> Workflow[D]: ...
def chain(first: Any, *builders: Any) -> Workflow[Any]:
    """``first`` (a job or a workflow), then each builder's step made from the result before
    it (for longer chains, continue with ``.then``).

    Raises:
        ConfigError: a builder is not a classmethod of a job class.
    """
    flow: Workflow[Any] = start(first)
    for builder in builders:
        flow = flow.then(builder)
    return flow


def group(*members: Job[Any, T] | Workflow[T]) -> Group[T]:
    """The members (jobs or workflows), run in parallel; add the fan-in with ``then`` or
    ``then_partial``.

    Raises:
        ConfigError: no member, or a member is neither a job nor a workflow.
    """
    return Group(tuple(start(member) for member in members))


def _new_id() -> str:
    return str(uuid.uuid4())


def step_rows(
    flow: Workflow[Any],
    target: Callable[[type[Job[Any, Any]]], tuple[str, str]],
    payload: Callable[[Job[Any, Any], str], Any],
    now_ms: int,
    headers: dict[str, str] | None = None,
) -> tuple[list[StepRow], list[StepEdge]]:
    """``flow``'s steps and edges as the backend stores them; ``target`` gives a job class's
    ``(job name, queue name)``, ``payload`` a root job's JSON fields; every step carries a
    copy of ``headers``.

    Raises:
        ConfigError: a step appears twice in ``flow``, or a step that feeds another declares
            no result type.
        TypeError: a step's job class is not of the producer's queue set.
    """
    seen: set[str] = set()
    feeding = {parent for node in flow.nodes for parent in node.parents}
    rows, edges = [], []
    for node in flow.nodes:
        if node.job_id in seen:
            raise ConfigError(
                f"workflow: a step of {node.job_class.__qualname__} appears twice; build each "
                "member anew (a workflow object is used once)"
            )
        seen.add(node.job_id)
        if node.job_id in feeding and node.job_class.__queuey_result__ is None:
            raise ConfigError(
                f"workflow: {node.job_class.__qualname__} feeds the next step but declares no "
                "result type; declare one (Job[Set, Result])"
            )
        name, queue = target(node.job_class)
        body = {} if node.job is None else payload(node.job, name)
        step = None
        if node.builder is not None:
            step = {"builder": node.builder, "many": node.many, "parents": list(node.parents)}
        parents = len(node.parents)
        rows.append(
            StepRow(node.job_id, queue, name, 0, body, now_ms, parents, step, dict(headers or {}))
        )
        edges += [StepEdge(p, node.job_id, at, node.policy) for at, p in enumerate(node.parents)]
    return rows, edges


STEP_KEY = "__queuey_step__"
"""The payload key of a released step: its builder's name and its parents' ends."""


def built_job(job_class: type[Job[Any, Any]], payload: Any) -> Job[Any, Any]:
    """The job ``payload`` decodes to: a released step's job built by its builder from its
    inputs (each parent's result, or ``StepFailed``), any other payload validated as is.

    Raises:
        pydantic.ValidationError: the payload, or an input, is not what the builder takes.
        Exception: whatever the builder raises.
    """
    if not (isinstance(payload, dict) and STEP_KEY in payload):
        return job_class.model_validate(payload)
    step = payload[STEP_KEY]
    builder = getattr(job_class, step["builder"])
    hint = _parameter_hint(builder)
    inputs = [_input(value) for value in step.get("inputs") or []]
    if step.get("many"):
        job = builder(TypeAdapter(hint).validate_python(inputs))
    else:
        job = builder(TypeAdapter(hint).validate_python(inputs[0] if inputs else None))
    if not isinstance(job, job_class):
        raise TypeError(f"{job_class.__qualname__}.{step['builder']} returned {job!r}")
    return job


def _input(value: Any) -> Any:
    """A parent's end as the builder gets it: its result, or a ``StepFailed``."""
    if isinstance(value, dict) and set(value) == {"queuey_failed"}:
        return StepFailed.model_validate(value["queuey_failed"])
    return value


def _parameter_hint(builder: Callable[..., Any]) -> Any:
    """The annotation of ``builder``'s one parameter (``Any`` when it has none)."""
    func = getattr(builder, "__func__", builder)
    parameters = list(inspect.signature(builder).parameters)
    hints = get_type_hints(func, include_extras=True)
    return hints.get(parameters[0], Any) if parameters else Any
