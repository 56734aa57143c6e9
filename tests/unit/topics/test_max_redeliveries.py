"""``[queues] max_redeliveries``: parsed and checked like every ``[queues]`` key, and handed to
the backend ``queuey run`` opens."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from queuey import MemoryBackend
from queuey.backends.postgres import PostgresBackend
from queuey.cli import _run, main
from queuey.errors import ConfigError
from queuey.topics import QueuesConfig, load_app_config
from queuey.topics.connection import backend_options


def test_the_default_is_five_as_the_backends() -> None:
    assert QueuesConfig().max_redeliveries == 5
    assert backend_options(QueuesConfig())["max_redeliveries"] == 5


def test_it_is_read_from_the_app_file(tmp_path: Path) -> None:
    path = tmp_path / "app.toml"
    path.write_text("[queues]\nmax_redeliveries = 2\n")
    config = load_app_config(path).queues
    assert config.max_redeliveries == 2
    assert backend_options(config) == {
        "channel": "queuey_queue",
        "poll_interval": timedelta(seconds=30),
        "lease": timedelta(seconds=300),
        "retain": timedelta(hours=24),
        "max_redeliveries": 2,
        "publish_timeout": timedelta(seconds=5),
    }


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "true", '"5"', "[5]"])
def test_a_bad_value_names_the_file_and_key(tmp_path: Path, value: str) -> None:
    path = tmp_path / "app.toml"
    path.write_text(f"[queues]\nmax_redeliveries = {value}\n")
    with pytest.raises(ConfigError) as caught:
        load_app_config(path)
    assert str(caught.value).startswith(f"{path}: queues.max_redeliveries: expected an integer")


def test_queuey_run_opens_its_backend_with_the_apps_max_redeliveries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "app.toml"
    path.write_text(
        '[queues]\nmax_redeliveries = 3\nprefix = "shop"\npoll_secs = 7\nlease_secs = 90\n'
        'retain_hours = 0\n[queues.subscribe]\n"order.paid" = "f"\n'
    )
    opened: list[dict[str, Any]] = []
    ran: list[object] = []

    async def fake_connect(cls: type[PostgresBackend], /, url: str, **options: Any) -> Any:
        opened.append({"url": url, **options})
        return MemoryBackend()

    async def fake_run_until_signal(start: Any, stop: Any, ready: Any = None) -> None:
        ran.append(start)

    monkeypatch.setattr(PostgresBackend, "connect", classmethod(fake_connect))
    monkeypatch.setattr(_run, "run_until_signal", fake_run_until_signal)
    monkeypatch.delenv("QUEUEY_DATABASE_URL", raising=False)
    result = CliRunner().invoke(
        main, ["run", "--config", str(path), "--database-url", "postgresql://h/db"]
    )
    assert result.exit_code == 0, result.output
    [options] = opened
    assert options["max_redeliveries"] == 3
    assert options["url"] == "postgresql://h/db"
    assert (options["channel"], options["retain"]) == ("shop_queue", None)
    assert options["poll_interval"].total_seconds() == 7
    assert options["lease"].total_seconds() == 90
    assert len(ran) == 1
