"""The overview's chart: rows done and failed per minute over the last hour, as inline SVG.

Rendered on the server from integers and times only (no text from the database), so it needs
no script and no escaping beyond the numbers it prints.
"""

from __future__ import annotations

from collections.abc import Sequence

from markupsafe import Markup

from queuey.backends.dashboard_store import Minute

__all__ = ["throughput_svg"]

_WIDTH, _HEIGHT, _LEFT, _BOTTOM, _TOP = 720, 160, 44, 22, 10


def throughput_svg(minutes: Sequence[Minute]) -> Markup:
    """An SVG bar chart: per minute, a green bar for done rows with a red bar for failed rows
    stacked on it; each bar's tooltip gives the minute (UTC) and both counts."""
    peak = max((m.done + m.failed for m in minutes), default=0)
    scale = _nice(peak)
    plot_h = _HEIGHT - _BOTTOM - _TOP
    slot = (_WIDTH - _LEFT) / max(len(minutes), 1)
    parts = [
        f'<svg class="chart" viewBox="0 0 {_WIDTH} {_HEIGHT}" role="img" '
        f'xmlns="http://www.w3.org/2000/svg" aria-label="Jobs done and failed per minute">',
        f'<line x1="{_LEFT}" y1="{_TOP + plot_h}" x2="{_WIDTH}" y2="{_TOP + plot_h}" '
        'stroke="#999"/>',
        f'<text x="{_LEFT - 6}" y="{_TOP + 8}" text-anchor="end" class="axis">{scale}</text>',
        f'<text x="{_LEFT - 6}" y="{_TOP + plot_h}" text-anchor="end" class="axis">0</text>',
        f'<text x="{_LEFT}" y="{_HEIGHT - 4}" class="axis">-60 min</text>',
        f'<text x="{_WIDTH}" y="{_HEIGHT - 4}" text-anchor="end" class="axis">now</text>',
    ]
    for index, minute in enumerate(minutes):
        x = _LEFT + index * slot + 1
        done_h = plot_h * minute.done / scale
        failed_h = plot_h * minute.failed / scale
        base = _TOP + plot_h
        label = f"{minute.minute:%H:%M} UTC: {minute.done} done, {minute.failed} failed"
        parts.append(f"<g><title>{label}</title>")
        parts.append(
            f'<rect x="{x:.1f}" y="{base - done_h:.1f}" width="{slot - 2:.1f}" '
            f'height="{done_h:.1f}" fill="#3a9d5d"/>'
        )
        parts.append(
            f'<rect x="{x:.1f}" y="{base - done_h - failed_h:.1f}" width="{slot - 2:.1f}" '
            f'height="{failed_h:.1f}" fill="#d64545"/></g>'
        )
    parts.append("</svg>")
    return Markup("".join(parts))


def _nice(peak: int) -> int:
    """The smallest of 1, 2, 5 x 10^n at or above ``peak`` (at least 1)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= peak:
                return step * factor
        step *= 10
