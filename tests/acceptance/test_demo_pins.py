"""Pins of ``queuey demo`` (seed ``001``'s ``memory_quickstart``, SEEDS-DIGEST §2.11) and of the
``-v``/``-vv`` logging levels, as a user sees them: exact output lines, not just counts."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from queuey import MemoryBackend
from queuey.demo import run_tour

ROOT = Path(__file__).resolve().parents[2]
_STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ")
_JOB_ID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\b")
DEAD_LETTER_LINE = (
    "dead letter on quickstart.emails (quickstart.SendEmail, attempt 1): "
    "fatal error: not-an-address is not a mailbox"
)
EMAIL = "INFO queuey.worker: job quickstart.SendEmail ID (quickstart.emails, attempt {}) {}"
# What `queuey -v demo` logs, timestamps removed and job ids replaced by "ID" (the order of
# concurrent jobs may vary): each line names the job's type, id, queue and attempt.
DEMO_LOG = Counter(
    {
        EMAIL.format(1, "succeeded"): 2,
        EMAIL.format(3, "succeeded"): 1,
        "INFO queuey.worker: job quickstart.ResizeImage ID (quickstart.images, attempt 1) "
        "succeeded": 1,
        "INFO queuey.worker: job quickstart.CallApi ID (quickstart.api, attempt 1) succeeded": 1,
        "WARNING queuey.worker: job quickstart.SendEmail ID (quickstart.emails, attempt 1) "
        "failed; retry in 0.050s: mail server busy (attempt 1)": 1,
        "WARNING queuey.worker: job quickstart.SendEmail ID (quickstart.emails, attempt 2) "
        "failed; retry in 0.050s: mail server busy (attempt 2)": 1,
        "ERROR queuey.worker: job quickstart.SendEmail ID (quickstart.emails, attempt 1) "
        "dead-lettered: fatal error: not-an-address is not a mailbox": 1,
        "INFO queuey.worker: job quickstart.CallApi ID (quickstart.api, attempt 1) deferred "
        "for 0.150s: rate limited": 1,
    }
)


def _python(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    env["COLUMNS"] = "200"  # no line wrapping in rich's output
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=60, env=env
    )


def _log_lines(stderr: str) -> list[str]:
    return [
        _JOB_ID.sub("ID", _STAMP.sub("", line))
        for line in stderr.splitlines()
        if _STAMP.match(line)
    ]


@pytest.mark.looptime
async def test_the_api_job_runs_again_with_attempt_1_deferrals_1_priority_10() -> None:
    backend = MemoryBackend()
    summary = await run_tour(backend)
    first, second = backend.acked("quickstart.api")
    assert first.job_id == second.job_id
    assert (first.attempt, first.deferrals, first.priority) == (1, 0, 0)
    assert (second.attempt, second.deferrals, second.priority) == (1, 1, 10)
    assert summary.as_json() == {
        "queues": {
            "quickstart.emails": {"acked": 5, "dead": 1, "pending": 0},
            "quickstart.images": {"acked": 1, "dead": 0, "pending": 0},
            "quickstart.api": {"acked": 2, "dead": 0, "pending": 0},
        },
        "dead_letters": [
            {
                "queue": "quickstart.emails",
                "job_type": "quickstart.SendEmail",
                "attempt": 1,
                "reason": "fatal error: not-an-address is not a mailbox",
            }
        ],
        "settled": 6,
    }
    flaky = [e for e in backend.acked("quickstart.emails") if e.payload["flaky_for"] == 2]
    assert [e.attempt for e in flaky] == [1, 2, 3]


def test_the_demo_prints_its_table_and_dead_letter_and_logs_each_outcome() -> None:
    result = _python("-m", "queuey", "-v", "demo")
    assert result.returncode == 0, result.stderr
    lines = [line.rstrip() for line in result.stdout.splitlines()]
    assert lines[-2] == DEAD_LETTER_LINE
    assert lines[-1] == "done: 6 settled"
    assert lines[0].strip() == "queuey demo on memory"
    rows = [re.findall(r"[\w.]+", line) for line in lines if line.startswith("│")]
    assert rows == [
        ["quickstart.emails", "5", "1", "0"],
        ["quickstart.images", "1", "0", "0"],
        ["quickstart.api", "2", "0", "0"],
    ]
    assert Counter(_log_lines(result.stderr)) == DEMO_LOG


def test_without_v_the_demo_logs_warnings_and_errors_only() -> None:
    result = _python("-m", "queuey", "demo", "--json")
    assert result.returncode == 0, result.stderr
    expected = Counter({k: n for k, n in DEMO_LOG.items() if not k.startswith("INFO")})
    assert Counter(_log_lines(result.stderr)) == expected


def test_vv_logs_at_debug() -> None:
    probe = (
        "import logging\n"
        "from queuey.cli import main\n"
        "try:\n"
        "    main(['-vv', 'demo', '--json'])\n"
        "except SystemExit as exc:\n"
        "    assert not exc.code, exc.code\n"
        "logging.getLogger('queuey.probe').debug('probe at debug')\n"
        "print(logging.getLevelName(logging.getLogger().level))\n"
    )
    result = _python("-c", probe)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == "DEBUG"
    assert "DEBUG queuey.probe: probe at debug" in _log_lines(result.stderr)
    assert Counter(
        line for line in _log_lines(result.stderr) if line.split(" ", 2)[1] == "queuey.worker:"
    ) == Counter(DEMO_LOG)
