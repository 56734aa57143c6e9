"""The workflow graph's SVG: a column per depth, text escaped, a bounded size."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from queuey.dashboard.graph import MAX_DRAWN, workflow_svg
from queuey.workflows import WorkflowStep

SVG = "{http://www.w3.org/2000/svg}"


def _step(job_id: str, *parents: str, job_type: str = "app.Step") -> WorkflowStep:
    return WorkflowStep(job_id, job_type, "q", "waiting", parents, None)


def test_steps_sit_a_column_right_of_their_deepest_parent_and_text_is_escaped() -> None:
    steps = [
        _step("a"),
        _step("b", "a"),
        _step("c", "a", "b", job_type='<b>"x" & y</b>'),
        _step("d", "gone"),  # a parent not among the steps (pruned): drawn as a first step
    ]
    svg = ET.fromstring(str(workflow_svg(steps, "/dash")))
    x = {a.get("data-id"): _x(a) for a in svg.iter(f"{SVG}a")}
    assert x["a"] == x["d"] < x["b"] < x["c"]
    names = [t.text for t in svg.iter(f"{SVG}text") if t.get("class") == "name"]
    assert names[2] == '<b>"x" & y</b>'  # escaped in the markup, parsed back whole
    assert len([p for p in svg.iter(f"{SVG}path") if p.get("data-child")]) == 3


def test_a_workflow_too_big_is_not_drawn() -> None:
    with pytest.raises(ValueError, match=f"at most {MAX_DRAWN}"):
        workflow_svg([_step(str(n)) for n in range(MAX_DRAWN + 1)], "/dash")


def _x(node: ET.Element) -> float:
    rect = node.find(f"{SVG}rect")
    assert rect is not None
    return float(rect.get("x", "nan"))
