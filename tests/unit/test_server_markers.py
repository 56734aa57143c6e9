"""Every integration test module declares the server it needs as a module marker
(``pytestmark``), so ``-m "not postgres"`` or ``-m rabbitmq`` selects exactly the tests that
need (or do not need) that server."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

INTEGRATION = Path(__file__).resolve().parents[1] / "integration"


def module_marks(path: Path) -> set[str]:
    """The names of the ``pytest.mark.<name>`` in the module's ``pytestmark``."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "pytestmark" for target in node.targets
        ):
            return {
                mark.attr
                for mark in ast.walk(node.value)
                if isinstance(mark, ast.Attribute)
                and isinstance(mark.value, ast.Attribute)
                and mark.value.attr == "mark"
            }
    return set()


@pytest.mark.parametrize("server", ["postgres", "rabbitmq"])
def test_every_integration_module_is_marked_with_its_server(server: str) -> None:
    modules = sorted((INTEGRATION / server).glob("test_*.py"))
    assert modules, f"no test module under {INTEGRATION / server}"
    unmarked = [path.name for path in modules if server not in module_marks(path)]
    assert unmarked == [], f"add `pytestmark = pytest.mark.{server}` to {unmarked}"
