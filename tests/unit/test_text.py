"""The one cut of recorded failure texts (``queuey._text``): in UTF-8 bytes on a character
boundary, NUL-free and surrogate-safe, and the same wherever a failure is recorded (the
outcome's text, an attempt's message, RabbitMQ's last-error header)."""

from __future__ import annotations

import pytest

from queuey._text import MAX_TEXT_BYTES, clean_tail, clean_text
from queuey.attempts import MAX_MESSAGE_BYTES, AttemptError
from queuey.backends.rabbitmq._wire import LAST_ERROR_HEADER, retry_headers

TEXTS = [
    "",
    "plain",
    "nul \x00 inside",
    "lone \ud800 surrogate",
    "x" * MAX_TEXT_BYTES,
    "x" * (MAX_TEXT_BYTES + 1),
    "é" * 3000,  # 2 bytes each: 3,000 characters, 6,000 bytes
    "a" + "é" * 2500,  # byte 4,000 splits an 'é'
    "€" * 2000,  # 3 bytes each
    "🙂" * 1500,  # 4 bytes each
]


@pytest.mark.parametrize("text", TEXTS)
def test_a_text_is_cut_in_bytes_on_a_character_boundary(text: str) -> None:
    cut = clean_text(text)
    data = cut.encode("utf-8")  # encodable: no unpaired surrogate is left
    assert "\x00" not in cut
    assert len(data) <= MAX_TEXT_BYTES + len("…".encode())
    kept = text.replace("\x00", "").encode("utf-8", errors="replace")
    if len(kept) <= MAX_TEXT_BYTES:
        assert data == kept
    else:
        assert cut.endswith("…") and kept.startswith(cut.removesuffix("…").encode())
        assert len(kept) - len(data) < len(kept) - MAX_TEXT_BYTES + 4  # at most one char lost
    assert clean_text(cut) == cut, "cutting twice changes nothing more"


@pytest.mark.parametrize("text", TEXTS)
def test_a_tail_keeps_the_last_bytes(text: str) -> None:
    tail = clean_tail(text, 100)
    assert len(tail.encode()) <= 103
    kept = text.replace("\x00", "").encode("utf-8", errors="replace")
    assert kept.endswith(tail.removeprefix("…").encode())


@pytest.mark.parametrize("text", TEXTS)
def test_every_recorded_failure_is_cut_the_same_way(text: str) -> None:
    assert MAX_MESSAGE_BYTES == MAX_TEXT_BYTES
    assert AttemptError.of(1, None, text).message == clean_text(text)
    assert AttemptError.of(1, ValueError(text), "").message == clean_text(text or "")
    assert retry_headers(text)[LAST_ERROR_HEADER] == clean_text(text)
