"""The web dashboard: queues, jobs, topics and an audit log, server-rendered from PostgreSQL.

Needs the ``http`` and ``dashboard`` extras (Starlette, Jinja2). Build it with
:func:`dashboard_mount` and pass it to ``publish_app(..., mounts=[...])`` to serve it at
``<base>/dashboard/`` beside the publish endpoint, or run ``queuey dashboard --config app.toml``.
The ``[dashboard]`` table (:class:`DashboardConfig`) says who may view and who may act; both
default to private (no dashboard at all). See ``docs/dashboard.md``.
"""

from queuey._extras import missing_extra

try:
    import jinja2  # noqa: F401
    import starlette  # noqa: F401
except ImportError as exc:
    raise missing_extra("the dashboard", "dashboard", exc) from exc

from queuey.dashboard.app import dashboard_app, dashboard_mount, dashboard_path
from queuey.dashboard.config import DashboardConfig

__all__ = [
    "DashboardConfig",
    "dashboard_app",
    "dashboard_mount",
    "dashboard_path",
]
