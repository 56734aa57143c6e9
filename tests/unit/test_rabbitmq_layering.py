"""The RabbitMQ package's imports, read from its source: no cycle between its modules (lazy and
``TYPE_CHECKING`` imports included), and nothing above the contract.

The helpers here read every import statement of a module, wherever it sits, and are shared
with ``test_memory_layering``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import queuey
from tests.unit.test_layers import LAYERS, parse

SRC = Path(queuey.__file__).resolve().parent.parent

BELOW_BACKENDS = frozenset(
    {
        "queuey.attempts",
        "queuey.envelope",
        "queuey.errors",
        "queuey.queues",
        "queuey.durations",
        "queuey._validation",
        "queuey.secrets",
        "queuey.unique",
        "queuey.limits",
        "queuey.schedule",
        "queuey.progress",
        "queuey._extras",
        "queuey._text",
        "queuey._waits",
    }
    | {f"queuey.{module}".rstrip(".") for module in LAYERS["contract"][0]}
)
"""What a backend may import from queuey besides its own package: the vocabulary (with the one
cut of error texts and ``first_of``), the credential redaction, the install hint for a missing
extra, and the contract (with its helpers for every backend: closing one left open at loop
shutdown, quieting the drivers' per-attempt log records, the runs a close waits for)."""


def _is_module(name: str) -> bool:
    path = SRC.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def package_modules(package: str) -> dict[str, Path]:
    """Every module of ``package`` (itself included), by dotted name."""
    root = SRC.joinpath(*package.split("."))
    modules = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        modules[name] = path
    return modules


def imports_of(path: Path, module: str) -> set[str]:
    """The queuey modules ``path`` (module ``module``) imports anywhere in its body: a
    ``from a import b`` counts as ``a.b`` when that is a module, else as ``a``."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            for alias in node.names:
                candidate = f"{base}.{alias.name}"
                found.add(candidate if _is_module(candidate) else base)
    return {name for name in found if name == "queuey" or name.startswith("queuey.")}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as the list of its nodes (first repeated last), or ``None``."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state and (cycle := visit(target)) is not None:
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)) is not None:
            return cycle
    return None


def internal_graph(package: str) -> dict[str, set[str]]:
    """Which modules of ``package`` each of its modules imports."""
    modules = package_modules(package)
    return {name: imports_of(path, name) & modules.keys() for name, path in modules.items()}


def outside_imports(package: str) -> dict[str, set[str]]:
    """The queuey modules outside ``package`` that each of its modules imports."""
    return {
        name: {
            m for m in imports_of(path, name) if m != package and not m.startswith(package + ".")
        }
        for name, path in package_modules(package).items()
    }


RABBITMQ = "queuey.backends.rabbitmq"


def test_the_rabbitmq_package_has_no_import_cycle() -> None:
    assert find_cycle(internal_graph(RABBITMQ)) is None


def test_the_rabbitmq_package_imports_only_the_vocabulary_and_the_contract() -> None:
    strays = {
        module: sorted(names - BELOW_BACKENDS)
        for module, names in outside_imports(RABBITMQ).items()
        if names - BELOW_BACKENDS
    }
    assert strays == {}


def test_a_rabbitmq_consumer_never_sees_the_backend() -> None:
    graph = internal_graph(RABBITMQ)
    for module in ("_consumer", "_delivery", "_router"):
        assert f"{RABBITMQ}._backend" not in graph[f"{RABBITMQ}.{module}"], module


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
