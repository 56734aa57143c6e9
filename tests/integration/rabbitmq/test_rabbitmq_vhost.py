"""An unknown vhost is refused with the broker's reason, not the repr of a protocol frame
(``Expected one of ['Connection.OpenOk'], got <Connection.Close object at 0x…>``), by the
library and by the command line."""

from __future__ import annotations

import subprocess
import sys
from urllib.parse import urlsplit, urlunsplit

import pytest

from queuey import BackendError
from queuey.backends.rabbitmq import RabbitMqBackend
from tests.conftest import unique
from tests.helpers import python_path

pytestmark = pytest.mark.rabbitmq


def with_vhost(url: str, vhost: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{vhost}"))


async def test_an_unknown_vhost_is_refused_with_the_brokers_reason(amqp_url: str) -> None:
    vhost = unique("nosuch")
    with pytest.raises(BackendError) as caught:
        await RabbitMqBackend.connect(with_vhost(amqp_url, vhost))
    message = str(caught.value)
    assert message.endswith(
        f"/{vhost}: the broker refused the connection: NOT_ALLOWED - vhost {vhost} not found (530)"
    ), message
    assert "object at 0x" not in message


def test_the_demo_says_why_the_broker_refused(amqp_url: str) -> None:
    vhost = unique("nosuch")
    done = subprocess.run(
        [sys.executable, "-m", "queuey", "demo", "--backend", "rabbitmq"],
        env={"PYTHONPATH": python_path(), "QUEUEY_AMQP_URL": with_vhost(amqp_url, vhost)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3, done.stderr
    assert done.stderr.startswith("error: connecting to amqp://"), done.stderr
    assert done.stderr.count("\n") == 1, done.stderr  # one line, nothing else
    assert done.stderr.endswith(f"NOT_ALLOWED - vhost {vhost} not found (530)\n"), done.stderr
    assert "object at 0x" not in done.stderr
