"""Passwords never reach messages or logs, however the URL is written."""

from __future__ import annotations

import logging

import pytest

from queuey.secrets import RedactingFilter, redact, remember


@pytest.mark.parametrize(
    ("conninfo", "message", "leak"),
    [
        (
            "ops:Wrong9Pw@127.0.0.1:55432/app",
            'missing "=" after "ops:Wrong9Pw@127.0.0.1"',
            "Wrong9Pw",
        ),
        (
            "postgresql://ops:Wr@ngPw99x@127.0.0.1/db",
            "failed to resolve host 'ngPw99x@127.0.0.1'",
            "ngPw99x",
        ),
        ("postgresql://ops:p%40ss-word@h/db", "auth failed for p@ss-word", "p@ss-word"),
        ("host=h password='s3 cret' user=u", "bad conninfo host=h password='s3 cret'", "s3 cret"),
        (
            "amqp://guest:hunter22@h:5672/",
            "connecting to amqp://guest:hunter22@h:5672/",
            "hunter22",
        ),
    ],
)
def test_remembered_passwords_are_masked_whole_and_in_pieces(
    conninfo: str, message: str, leak: str
) -> None:
    remember(conninfo)
    assert leak not in redact(message)


def test_password_shaped_text_is_masked_even_if_never_seen() -> None:
    assert redact("postgresql://u:never-seen-pw@h/db") == "postgresql://u:***@h/db"
    assert redact("x password=abc123 y") == "x password=*** y"
    assert redact("fatal error: ada@example.com is not a mailbox").endswith("mailbox")


def test_the_log_filter_redacts_third_party_records(caplog: pytest.LogCaptureFixture) -> None:
    remember("amqp://guest:drv-secret-1@h/")
    record = logging.LogRecord(
        "aiormq", logging.DEBUG, __file__, 1, "dial %s", ("amqp://guest:drv-secret-1@h/",), None
    )
    assert RedactingFilter().filter(record)
    assert "drv-secret-1" not in record.getMessage()
