"""The ``PostgresBackend`` that ``queuey run`` opens for an app carries the app's ``[queues]``
settings, ``max_redeliveries`` included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from queuey.backends.postgres import PostgresBackend
from queuey.cli import _app, _run, main

pytestmark = pytest.mark.postgres


def test_queuey_run_builds_a_backend_with_the_apps_max_redeliveries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, database_url: str, pg_schema: str
) -> None:
    path = tmp_path / "app.toml"
    path.write_text(
        '[queues]\nmax_redeliveries = 2\nprefix = "shop"\n[queues.subscribe]\n"order.paid" = "f"\n'
    )
    built: list[Any] = []
    real_connect = _app.connect_backend

    async def spy(*args: Any, **kwargs: Any) -> Any:
        backend = await real_connect(*args, **kwargs)
        built.append(backend)
        return backend

    async def return_at_once(start: Any, stop: Any, ready: Any = None) -> None:
        return None

    monkeypatch.setattr(_run, "connect_backend", spy)
    monkeypatch.setattr(_run, "run_until_signal", return_at_once)
    result = CliRunner().invoke(
        main,
        ["run", "--config", str(path), "--database-url", database_url, "--schema", pg_schema],
    )
    assert result.exit_code == 0, result.output
    [backend] = built
    assert isinstance(backend, PostgresBackend)
    assert backend.max_redeliveries == 2
    assert backend.channel == "shop_queue"
