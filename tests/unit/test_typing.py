"""Run mypy --strict on ``tests/typing/must_fail.py``: exactly the marked lines must fail."""

from __future__ import annotations

import re
from pathlib import Path

from mypy import api

CASES = Path(__file__).parent.parent / "typing" / "must_fail.py"


def test_foreign_jobs_and_handlers_fail_type_checking() -> None:
    expected = {
        number: match.group(1)
        for number, line in enumerate(CASES.read_text().splitlines(), start=1)
        if (match := re.search(r"# error: ([\w-]+)", line))
    }
    stdout, _, _ = api.run(["--strict", "--no-incremental", "--config-file=", str(CASES)])
    reported = {
        int(m.group(1)): m.group(2)
        for m in re.finditer(r"must_fail\.py:(\d+): error: .*\[([\w-]+)\]", stdout)
    }
    assert reported == expected, stdout
