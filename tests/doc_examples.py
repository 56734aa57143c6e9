"""The documentation's examples (``examples/docs/*.py``): loading one as a module, and which
test runs which, so that a new example no test runs fails ``tests/unit/test_docs_site.py``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.helpers import ROOT

EXAMPLES = ROOT / "examples" / "docs"

IN_MEMORY = (
    "jobs_and_queues",
    "outcomes",
    "topics_in_code",
    "unique_jobs",
    "periodic_jobs",
    "from_celery",
    "results",
    "batch_handlers",
    "flow_limits",
)
"""Run by ``tests/unit/test_docs_examples.py`` under virtual time."""

PYTEST_FILES = ("test_handlers",)
"""Run with pytest by ``tests/unit/test_docs_examples.py``."""

ON_POSTGRES = (
    "quickstart",
    "transactional_enqueue",
    "postgres_operations",
    "many_workers",
    "from_procrastinate",
    "workflows",
)
"""Run by ``tests/integration/postgres/test_docs_examples.py`` in a schema of their own."""

ON_RABBITMQ = ("three_backends",)
"""Run by ``tests/integration/rabbitmq/test_docs_examples.py`` (PostgreSQL and RabbitMQ)."""


def example_path(name: str) -> Path:
    return EXAMPLES / f"{name}.py"


def load_example(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    """``examples/docs/<name>.py`` imported afresh as ``docs_example_<name>``, with the
    environment the caller set (the examples read their URLs when imported)."""
    spec = importlib.util.spec_from_file_location(f"docs_example_{name}", example_path(name))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # pydantic's generics look it up
    spec.loader.exec_module(module)
    return module
