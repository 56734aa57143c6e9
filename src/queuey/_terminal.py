"""Text from outside (job errors, payloads, queue and job type names, messages) made safe to
write to a terminal or a log line: every control sequence is shown, never obeyed.

A terminal obeys more than it prints: ESC starts CSI sequences (``ESC [``, moving the cursor,
clearing the screen, recolouring) and OSC sequences (``ESC ]``, setting the window title,
writing hyperlinks or the clipboard); the 8-bit C1 codes (U+0080 to U+009F, such as U+009B,
a one-character CSI) do the same on many terminals; CR and BS overwrite what is on the line;
bidirectional overrides (U+202E...) reorder it on screen. :func:`printable` replaces each such
character with a visible escape (``\\x1b``, ``\\x9b``, ``\\r``, ``\\u202e``), so an ESC in an
error reads as the four characters ``\\x1b`` and nothing it was meant to start happens. A
newline is escaped (``\\n``) too unless the text is a block whose lines are meant to be kept
(a traceback, indented JSON).
"""

from __future__ import annotations

import re

__all__ = ["printable", "printable_json"]

_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
_FORMAT_CONTROLS = "\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_UNSAFE_LINE = re.compile(f"[\x00-\x1f\x7f-\x9f{_FORMAT_CONTROLS}]")
_UNSAFE_BLOCK = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_FORMAT_CONTROLS}]")
_UNSAFE_IN_JSON = re.compile(f"[\x7f-\x9f{_FORMAT_CONTROLS}]")


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in _ESCAPES:
        return _ESCAPES[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, block: bool = False) -> str:
    """``text`` with every control character shown as an escape instead of obeyed.

    Args:
        text: any text (a non-string is converted with ``str``).
        block: keep newlines and tabs (a multi-line block such as a traceback); otherwise
            they are escaped too (``\\n``, ``\\t``), so the text stays on one line.

    Returns:
        The text with C0 controls (ESC, CR, BS, BEL...), DEL, the C1 controls U+0080 to
        U+009F and the bidirectional and line-separator format characters escaped as
        ``\\xNN`` (``\\n``, ``\\r``, ``\\t`` by name) or ``\\uNNNN``; everything else as is.
    """
    text = text if isinstance(text, str) else str(text)
    return (_UNSAFE_BLOCK if block else _UNSAFE_LINE).sub(_escape, text)


def printable_json(text: str) -> str:
    """JSON text with the characters JSON leaves raw but a terminal obeys (DEL, the C1
    controls, bidirectional overrides) written as ``\\uNNNN`` escapes: the same JSON value,
    safe to print (``json.dumps`` already escapes the C0 controls)."""
    return _UNSAFE_IN_JSON.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
