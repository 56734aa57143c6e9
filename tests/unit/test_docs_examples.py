"""The documentation's in-memory examples run, under virtual time, and their assertions hold
(each example checks what its page says it does)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.doc_examples import IN_MEMORY, PYTEST_FILES, example_path, load_example
from tests.helpers import ROOT, python_path


@pytest.mark.looptime
@pytest.mark.parametrize("name", IN_MEMORY)
async def test_example_runs(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module = load_example(name, monkeypatch)
    await module.main()


@pytest.mark.parametrize("name", PYTEST_FILES)
def test_example_tests_pass(name: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(example_path(name))],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": python_path()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert " passed" in result.stdout and "failed" not in result.stdout
