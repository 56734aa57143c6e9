"""An app served by ``queuey run --http`` (or ``queuey dashboard``) in a child process for the
dashboard's acceptance tests: its TOML, its functions, and the keys that sign in."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from queuey.http import api_key_digest
from tests.acceptance.http_process import free_port, python_path, stop, wait_until_up

ADMIN_KEY = "qk_browser_admin_0123456789"
VIEWER_KEY = "qk_browser_viewer_0123456789"
SECRET = "browser-session-secret-0123456789abcdef"

FUNCTIONS = '''
"""Functions of the dashboard's acceptance app."""

_seen: set[str] = set()


def fulfil(payload, context):
    return None


def flaky(payload, context):
    """Fails the first time it sees a message, succeeds after (a retry then runs it)."""
    if context.message_id not in _seen:
        _seen.add(context.message_id)
        raise RuntimeError("flaky: first try fails <b>on purpose</b>")
'''

APP_TOML = """
[functions]
fulfil = "dashboard_functions:fulfil"
flaky = "dashboard_functions:flaky"

[queues]
prefix = "shop"
poll_secs = 1
max_attempts = 1
publish = "role:ops"

[queues.subscribe]
"order.paid" = "fulfil"
"flaky.work" = "flaky"

[http]
base = "/api"

[[http.api_keys]]
id = "admin-bot"
roles = ["admin"]
sha256 = "{admin}"

[[http.api_keys]]
id = "viewer-bot"
roles = ["ops"]
sha256 = "{viewer}"

[dashboard]
view = "{view}"
act = "role:admin"
secret = "{secret}"
"""


@dataclass(frozen=True)
class Served:
    """A running server: where it listens and what it was given."""

    url: str
    schema: str
    process: subprocess.Popen[bytes]

    @property
    def dashboard(self) -> str:
        return f"{self.url}/api/dashboard"


def write_app(folder: Path, *, view: str = "role:ops") -> Path:
    """The app's TOML and functions module in ``folder``; returns the TOML's path."""
    (folder / "dashboard_functions.py").write_text(FUNCTIONS)
    path = folder / "app.toml"
    text = APP_TOML.format(
        admin=api_key_digest(ADMIN_KEY),
        viewer=api_key_digest(VIEWER_KEY),
        view=view,
        secret=SECRET,
    )
    path.write_text(text)
    return path


@contextmanager
def serve(
    command: list[str], config: Path, database_url: str, schema: str, ready_path: str
) -> Iterator[Served]:
    """Run ``queuey <command> --config <config> --port N --schema <schema>`` until the block
    ends; the server's output is printed when it fails to start."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": python_path(), "QUEUEY_DATABASE_URL": database_url}
    process = subprocess.Popen(
        [sys.executable, "-m", "queuey", *command, "--config", str(config), "--port", str(port),
         "--schema", schema],
        cwd=config.parent, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url + ready_path, process)
        yield Served(url, schema, process)
    finally:
        stop(process)
