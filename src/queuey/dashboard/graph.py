"""The workflow page's graph: each step a node coloured by its state, an arrow from each
parent to its child, as inline SVG rendered on the server (no script).

Steps are laid out in columns by depth (a first step in the first column, every other step
one column right of its deepest parent) and in enqueue order down each column. Every text
(job names, ids, errors: all from the database) is escaped; numbers are formatted by us.
"""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup, escape

from queuey.backends.workflow_ops import WorkflowStep

__all__ = ["MAX_DRAWN", "STATE_COLOURS", "workflow_svg"]

MAX_DRAWN = 400
"""A workflow with more steps than this is not drawn (the page lists its steps instead)."""

STATE_COLOURS = {
    "waiting": "#b8b8b8",
    "pending": "#6c8ebf",
    "running": "#e0a030",
    "done": "#3a9d5d",
    "failed": "#d64545",
    "cancelled": "#8a6d9e",
}
"""The fill of a step's node per state (the legend shows them)."""

_NODE_W, _NODE_H, _GAP_X, _GAP_Y, _PAD = 180, 44, 60, 16, 12
_LABEL = 24  # characters of a job name shown in its node (all of it in the tooltip)


def _depths(steps: Sequence[WorkflowStep]) -> dict[str, int]:
    """Each step's column: 0 for a step with no known parent, else 1 + its deepest parent's.
    Parents come before their children in ``steps``; a parent not among them is ignored."""
    depth: dict[str, int] = {}
    for step in steps:
        known = [depth[p] for p in step.parents if p in depth]
        depth[step.job_id] = 1 + max(known) if known else 0
    return depth


def workflow_svg(steps: Sequence[WorkflowStep], root: str) -> Markup:
    """The SVG of ``steps`` (a workflow's, parents first); each node links to its job page
    under ``root`` (the dashboard's path) and its tooltip gives the step's job id, job name,
    state and error.

    Raises:
        ValueError: more than ``MAX_DRAWN`` steps.
    """
    if len(steps) > MAX_DRAWN:
        raise ValueError(f"{len(steps)} steps: at most {MAX_DRAWN} are drawn")
    depth = _depths(steps)
    rows: dict[int, int] = {}
    at: dict[str, tuple[float, float]] = {}
    for step in steps:
        column = depth[step.job_id]
        row = rows.get(column, 0)
        rows[column] = row + 1
        at[step.job_id] = (
            _PAD + column * (_NODE_W + _GAP_X),
            _PAD + row * (_NODE_H + _GAP_Y),
        )
    width = _PAD * 2 + (max(rows, default=0) + 1) * (_NODE_W + _GAP_X) - _GAP_X
    height = _PAD * 2 + max(rows.values(), default=1) * (_NODE_H + _GAP_Y) - _GAP_Y
    parts = [
        f'<svg class="workflow" id="workflow-graph" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" xmlns="http://www.w3.org/2000/svg" '
        'aria-label="The workflow\'s steps and what each is built from">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" '
        'fill="#777"/></marker></defs>',
    ]
    parts += [_edge(at[p], at[s.job_id], p, s.job_id) for s in steps for p in s.parents if p in at]
    parts += [_node(step, at[step.job_id], root) for step in steps]
    parts.append("</svg>")
    return Markup("".join(parts))


def _edge(start: tuple[float, float], end: tuple[float, float], parent: str, child: str) -> str:
    x1, y1 = start[0] + _NODE_W, start[1] + _NODE_H / 2
    x2, y2 = end[0], end[1] + _NODE_H / 2
    bend = (x1 + x2) / 2
    return (
        f'<path class="edge" data-parent="{escape(parent)}" data-child="{escape(child)}" '
        f'd="M {x1:.0f} {y1:.0f} C {bend:.0f} {y1:.0f}, {bend:.0f} {y2:.0f}, {x2:.0f} {y2:.0f}" '
        'fill="none" stroke="#777" stroke-width="1.5" marker-end="url(#arrow)"/>'
    )


def _node(step: WorkflowStep, where: tuple[float, float], root: str) -> str:
    x, y = where
    name = step.job_type if len(step.job_type) <= _LABEL else step.job_type[: _LABEL - 1] + "…"
    tip = f"{step.job_id}\n{step.job_type} ({step.queue}): {step.state}"
    if step.error:
        tip += f"\n{step.error[:500]}"
    fill = STATE_COLOURS.get(step.state, "#ffffff")
    return (
        f'<a href="{escape(root)}/jobs/{escape(step.job_id)}" class="step" '
        f'data-id="{escape(step.job_id)}" data-state="{escape(step.state)}">'
        f"<title>{escape(tip)}</title>"
        f'<rect x="{x:.0f}" y="{y:.0f}" width="{_NODE_W}" height="{_NODE_H}" rx="6" '
        f'fill="{fill}" stroke="#444"/>'
        f'<text x="{x + 8:.0f}" y="{y + 18:.0f}" class="name">{escape(name)}</text>'
        f'<text x="{x + 8:.0f}" y="{y + 35:.0f}" class="state">{escape(step.state)} · '
        f"{escape(step.job_id[:8])}</text></a>"
    )
