"""``printable``: every character a terminal obeys is shown as an escape, nothing else changes;
``TextFormatter`` and ``JsonFormatter`` write log records through it."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from queuey._terminal import printable, printable_json
from queuey.observability import JsonFormatter, TextFormatter

CONTROLS = [chr(c) for c in (*range(0x00, 0x20), *range(0x7F, 0xA0))]
FORMAT_CONTROLS = ["\u061c", "\u200e", "\u200f", "\u2028", "\u2029"]
FORMAT_CONTROLS += [chr(c) for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]


@pytest.mark.parametrize("char", CONTROLS + FORMAT_CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
def test_every_control_character_is_escaped_on_one_line(char: str) -> None:
    shown = printable(f"a{char}b")
    assert shown.startswith("a\\") and shown.endswith("b")
    assert all(ord(c) >= 0x20 and not 0x7F <= ord(c) < 0xA0 for c in shown)
    assert char not in shown


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("\x1b]0;title\x07", "\\x1b]0;title\\x07"),
        ("\x1b[2J", "\\x1b[2J"),
        ("\x9b31m", "\\x9b31m"),
        ("a\nb\tc\rd", "a\\nb\\tc\\rd"),
        ("\u202eevil", "\\u202eevil"),
        ("héllo wörld ✓ 日本 🙂 \\ back", "héllo wörld ✓ 日本 🙂 \\ back"),
    ],
)
def test_what_it_shows(text: str, shown: str) -> None:
    assert printable(text) == shown


def test_a_block_keeps_its_lines_and_tabs_only() -> None:
    assert printable("one\n\ttwo\x1b[0m\r\n", block=True) == "one\n\ttwo\\x1b[0m\\r\n"


def test_json_stays_the_same_value() -> None:
    value = {"e": "\x1b]0;t\x07\x9b\x7f\u202e\n", "n": [1, "ok"]}
    text = printable_json(json.dumps(value, ensure_ascii=False))
    assert json.loads(text) == value
    assert all(ord(c) >= 0x20 and not 0x7F <= ord(c) < 0xA0 for c in text)


def record(message: str, *args: object, exc: bool = False) -> logging.LogRecord:
    info = None
    if exc:
        try:
            raise ValueError("bad\x1b]0;t\x07\nsecond line")
        except ValueError:
            info = sys.exc_info()
    return logging.LogRecord("queuey.test", logging.ERROR, __file__, 1, message, args, info)


def test_the_text_formatter_writes_one_escaped_line_and_an_escaped_traceback() -> None:
    text = TextFormatter().format(record("job failed: %s", "x\x1b[2J\nforged line", exc=True))
    first, *rest = text.split("\n")
    assert first.endswith("ERROR queuey.test: job failed: x\\x1b[2J\\nforged line")
    assert rest[0] == "Traceback (most recent call last):"
    assert "ValueError: bad\\x1b]0;t\\x07" in text and rest[-1] == "second line"


def test_the_json_formatter_escapes_c1_and_bidi() -> None:
    line = JsonFormatter().format(record("%s", "a\x9b31m\u202eb"))
    assert "\x9b" not in line and "\u202e" not in line
    assert json.loads(line)["message"] == "a\x9b31m\u202eb"
