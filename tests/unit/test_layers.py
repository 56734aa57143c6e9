"""The import graph of ``src/queuey``, read from the source with ``ast``: no import cycle, and
every import points down the layer table (the contract is singular, the arrows
point one way).

Every ``import`` and ``from ... import`` counts, wherever it sits: at the top, inside a
function (a lazy import is still a dependency), under ``if TYPE_CHECKING:``. ``from a import b``
is an edge to module ``a.b`` when that is a module, else to ``a``. Importing a submodule also
runs its parent packages' ``__init__``; those implicit edges are not counted (every package
that re-exports its modules would otherwise be a cycle).
"""

from __future__ import annotations

import ast
import gc
from collections.abc import Iterator
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path

import queuey

PACKAGE = Path(queuey.__file__).resolve().parent

# Which module is in which layer (patterns over dotted names inside ``queuey``; ``""`` is the
# package itself), and which other layers each may import. A layer may always import its own
# modules. The concrete backends are three layers: they import the vocabulary and the contract,
# never each other; only the edges choose one (the runtime and the faces know the contract).
LAYERS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "vocabulary": (
        (
            "errors",
            "durations",
            "_duration_syntax",
            "_validation",
            "_payload",
            "_job_batch",
            "envelope",
            "secrets",
            "_terminal",
            "retry",
            "queues",
            "jobs",
            "_text",
            "_waits",
            "_outcome",
            "unique",
            "limits",
            "schedule",
            "_run_scope",
            "_extras",
            "_registration",
            "attempts",
            "progress",
            "batching",
        ),
        (),
    ),
    "contract": (
        (
            "backends",
            "backends.base",
            "backends._records",
            "backends._capabilities",
            "backends._sync_contract",
            "backends._unclosed",
            "backends._quiet",
            "backends._runs",
            "backends._waiters",
            "backends.steps",
            "backends.batches",
            "backends.dashboard_store",
            "backends.flow_view",
            "backends.workflow_ops",
            "backends.batch_settle",
        ),
        ("vocabulary",),
    ),
    "memory": (("backends.memory", "backends.memory.*"), ("vocabulary", "contract")),
    "postgres": (("backends.postgres", "backends.postgres.*"), ("vocabulary", "contract")),
    "rabbitmq": (("backends.rabbitmq", "backends.rabbitmq.*"), ("vocabulary", "contract")),
    "runtime": (
        (
            "_runtime",
            "_runtime.*",
            "producer",
            "worker",
            "results",
            "workflows",
            "batches",
            "fan_out",
        ),
        ("vocabulary", "contract"),
    ),
    "faces": (("topics", "topics.*"), ("vocabulary", "contract", "runtime")),
    "edges": (  # what a user runs or mounts (``dashboard`` is the web UI being built)
        (
            "",
            "__main__",
            "http",
            "http.*",
            "cli",
            "cli.*",
            "demo",
            "testing",
            "sync",
            "observability",
            "dashboard*",
        ),
        ("vocabulary", "contract", "memory", "postgres", "rabbitmq", "runtime", "faces"),
    ),
}

# Import edges (importer, imported) tolerated while a cycle is being removed: none today. An
# edge listed here that no longer exists fails the test, so the list can only shrink.
KNOWN_CYCLES: frozenset[tuple[str, str]] = frozenset()


@cache
def modules() -> dict[str, Path]:
    """Every module of the package by dotted name inside it (``""`` for the package)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute dotted name a ``from`` import names (relative ones resolved)."""
    if not node.level:
        return node.module or ""
    here = ["queuey", *filter(None, module.split("."))]
    anchor = here if is_package else here[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join([*anchor, *([node.module] if node.module else [])])


def _inside(name: str) -> str | None:
    """``queuey.a.b`` → ``a.b``, ``queuey`` → ``""``, anything else → ``None``."""
    if name == "queuey":
        return ""
    return name.removeprefix("queuey.") if name.startswith("queuey.") else None


def parse(path: Path) -> ast.Module:
    """``path``'s syntax tree. The garbage collector is off while it is built: on CPython 3.11
    a collection inside ``ast.parse`` can run a finalizer that lets another thread compile
    code, which resets the parser's shared recursion count ("AST constructor recursion depth
    mismatch"), as threads left by earlier tests did."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return ast.parse(path.read_text(encoding="utf-8"), str(path))
    finally:
        if enabled:
            gc.enable()


def imports_of(module: str, path: Path, known: set[str]) -> set[str]:
    """The modules of the package that ``module`` imports, anywhere in its source."""
    targets: set[str] = set()

    def add(name: str) -> None:
        inner = _inside(name)
        while inner is not None and inner not in known:  # a.b.attr → a.b
            inner = inner.rpartition(".")[0] if inner else None
        if inner is not None and inner != module:
            targets.add(inner)

    for node in ast.walk(parse(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, path.name == "__init__.py")
            for alias in node.names:
                add(f"{base}.{alias.name}" if alias.name != "*" else base)
    return targets


def import_graph() -> dict[str, set[str]]:
    """Module → the modules it imports."""
    found = modules()
    return {name: imports_of(name, path, set(found)) for name, path in found.items()}


def layer_of(module: str) -> str | None:
    for layer, (patterns, _) in LAYERS.items():
        if any(fnmatchcase(module, pattern) for pattern in patterns):
            return layer
    return None


def file_of(module: str) -> str:
    return str(modules()[module].relative_to(PACKAGE.parent))


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _without_known(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    return {a: {b for b in targets if (a, b) not in KNOWN_CYCLES} for a, targets in graph.items()}


def _edges(graph: dict[str, set[str]]) -> Iterator[tuple[str, str]]:
    for importer, targets in sorted(graph.items()):
        for imported in sorted(targets):
            yield importer, imported


# -- the checks -------------------------------------------------------------------------------


def test_every_module_has_a_layer() -> None:
    unplaced = [file_of(m) for m in modules() if layer_of(m) is None]
    assert unplaced == [], f"add these modules to LAYERS in {__name__}: {unplaced}"


def test_no_import_cycle() -> None:
    found = cycles(_without_known(import_graph()))
    shown = [" ↔ ".join(file_of(m) for m in component) for component in found]
    assert shown == [], "import cycles:\n" + "\n".join(shown)


def test_every_import_points_down_the_layers() -> None:
    wrong = []
    for importer, imported in _edges(_without_known(import_graph())):
        source, target = layer_of(importer), layer_of(imported)
        if source is None or target is None or source == target:
            continue
        if target not in LAYERS[source][1]:
            wrong.append(f"{file_of(importer)} ({source}) imports {file_of(imported)} ({target})")
    assert wrong == [], "imports against the layers:\n" + "\n".join(wrong)


def private_owner(imported: str) -> str | None:
    """The package whose private module ``imported`` is (``a._b.c`` → ``a``), or ``None``
    when no part of its dotted name is private."""
    parts = imported.split(".") if imported else []
    for depth, part in enumerate(parts):
        if part.startswith("_") and not part.startswith("__"):
            return ".".join(parts[:depth])
    return None


def reaches_private(importer: str, imported: str) -> bool:
    """Whether ``importer`` reaches into another package's private module: a private module
    is for its own package and the packages inside it, never for a sibling or a parent."""
    owner = private_owner(imported)
    if owner is None:
        return False
    package = importer if modules()[importer].name == "__init__.py" else importer.rpartition(".")[0]
    return not (owner == "" or package == owner or package.startswith(owner + "."))


def test_no_module_imports_another_packages_private_module() -> None:
    wrong = [
        f"{file_of(importer)} imports {file_of(imported)}: import what its package exports"
        for importer, imported in _edges(import_graph())
        if reaches_private(importer, imported)
    ]
    assert wrong == [], "private modules of other packages:\n" + "\n".join(wrong)


def test_known_cycles_still_exist() -> None:
    graph = import_graph()
    gone = sorted(edge for edge in KNOWN_CYCLES if edge[1] not in graph.get(edge[0], set()))
    assert gone == [], f"remove these edges from KNOWN_CYCLES, they are fixed: {gone}"


# -- the checker itself ---------------------------------------------------------------------


def test_the_checker_sees_lazy_and_type_checking_imports(tmp_path: Path) -> None:
    source = tmp_path / "sample.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from queuey.worker import Worker\n"
        "def f():\n"
        "    import queuey.backends.postgres._backend\n"
        "    from . import retry\n"
        "    from queuey.errors import ConfigError\n"
        "    from queuey import Queue\n"
    )
    known = set(modules())
    assert imports_of("jobs", source, known) == {
        "worker",
        "backends.postgres._backend",
        "retry",
        "errors",
        "",
    }


def test_the_checker_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_the_checker_tells_a_private_module_of_another_package() -> None:
    assert reaches_private("cli._failed", "backends.postgres._admin")
    assert reaches_private("dashboard.app", "backends.postgres._dashboard")
    assert not reaches_private("backends.postgres._store", "backends.postgres._sql")
    assert not reaches_private("backends.postgres", "backends.postgres._admin")
    assert not reaches_private("backends.postgres._store", "_payload")
    assert not reaches_private("cli._failed", "cli._rows_view")


def test_the_layer_table_reads_as_intended() -> None:
    assert layer_of("errors") == "vocabulary"
    assert layer_of("backends.base") == "contract"
    assert layer_of("backends.postgres._consumer") == "postgres"
    assert layer_of("_runtime.loop") == "runtime"
    assert layer_of("topics.connection") == "faces"
    assert layer_of("cli._run") == layer_of("") == "edges"
    assert "postgres" not in LAYERS["faces"][1] and "postgres" not in LAYERS["runtime"][1]
    assert "postgres" not in LAYERS["memory"][1] and "faces" not in LAYERS["runtime"][1]
