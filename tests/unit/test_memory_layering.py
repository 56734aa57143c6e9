"""The memory backend's imports and interfaces, read from the source: no cycle, nothing above the
contract (not ``queuey.testing``, not the runtime), and the contract package itself imports no
implementation."""

from __future__ import annotations

import ast

import queuey
from queuey.backends.memory import MemoryBackend
from tests.unit.test_rabbitmq_layering import (
    BELOW_BACKENDS,
    SRC,
    find_cycle,
    internal_graph,
    outside_imports,
)

MEMORY = "queuey.backends.memory"


def test_the_memory_package_has_no_import_cycle() -> None:
    assert find_cycle(internal_graph(MEMORY)) is None


def test_the_memory_package_imports_only_the_vocabulary_and_the_contract() -> None:
    strays = {
        module: sorted(names - BELOW_BACKENDS)
        for module, names in outside_imports(MEMORY).items()
        if names - BELOW_BACKENDS
    }
    assert strays == {}


def test_the_contract_package_imports_only_the_contract_when_loaded() -> None:
    tree = ast.parse((SRC / "queuey" / "backends" / "__init__.py").read_text())
    loaded = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("queuey")
    }
    assert loaded == {"queuey.backends.base"}


def test_memory_backend_is_the_facade_s_memory_backend() -> None:
    assert MemoryBackend is queuey.MemoryBackend
    assert MemoryBackend.__module__ == MEMORY


def test_testing_reads_the_memory_backend_through_its_public_helpers() -> None:
    tree = ast.parse((SRC / "queuey" / "testing.py").read_text())
    private = [
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
    ]
    assert private == []
