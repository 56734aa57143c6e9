"""``queuey run`` and ``queuey publish``: the mistakes caught before any connection (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from queuey.cli import main

APP = '[queues.subscribe]\n"order.paid" = "f"\n'


@pytest.fixture
def app_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("QUEUEY_DATABASE_URL", raising=False)
    path = tmp_path / "app.toml"
    path.write_text(APP)
    return path


def invoke(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize("command", ["run", "publish"])
def test_no_database_url_at_all_says_so(app_file: Path, command: str) -> None:
    extra = ["order.paid", "{}"] if command == "publish" else []
    code, output = invoke(command, "--config", str(app_file), *extra)
    assert code == 2
    assert "no database URL" in output
    assert "QUEUEY_DATABASE_URL" in output and "[database] url" in output


def test_publish_refuses_bad_json(app_file: Path) -> None:
    code, output = invoke("publish", "--config", str(app_file), "order.paid", "{bad")
    assert code == 2
    assert "the payload is not valid JSON" in output


def test_publish_refuses_a_bad_topic(app_file: Path) -> None:
    code, output = invoke(
        "publish", "--config", str(app_file), "--database-url", "postgresql://x/y", "a b", "{}"
    )
    assert code == 2
    assert "'a b' is not a topic" in output


@pytest.mark.parametrize("command", ["run", "publish"])
def test_a_bad_config_is_named(tmp_path: Path, command: str) -> None:
    path = tmp_path / "app.toml"
    path.write_text("[queues]\nbatch = 0\n")
    extra = ["order.paid"] if command == "publish" else []
    code, output = invoke(command, "--config", str(path), *extra)
    assert code == 2
    assert f"{path}: queues.batch" in output


def test_run_refuses_an_app_target_that_is_not_an_app(app_file: Path) -> None:
    code, output = invoke(
        "run", "--config", str(app_file), "--app", "queuey.cli:main", "--database-url", "x"
    )
    assert code == 2
    assert "is not a queuey.topics.App" in output


def test_run_names_an_unimportable_function(tmp_path: Path) -> None:
    path = tmp_path / "app.toml"
    path.write_text('[functions]\nf = "qt_nowhere_module:f"\n')
    code, output = invoke("run", "--config", str(path), "--database-url", "x")
    assert code == 2
    assert f"{path}: functions.f: cannot import 'qt_nowhere_module'" in output
