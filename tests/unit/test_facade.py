"""The public facade is exactly what ``__all__`` lists, imported on first use."""

import ast
import importlib
import inspect

import queuey


def test_all_is_sorted_and_complete() -> None:
    assert sorted(queuey.__all__) == queuey.__all__
    assert set(queuey.__all__) == set(queuey._WHERE)
    for name in queuey.__all__:
        module = importlib.import_module(queuey._WHERE[name])
        assert getattr(queuey, name) is getattr(module, name), name
    assert "Worker" in dir(queuey)


def test_what_type_checkers_see_is_what_is_exported() -> None:
    tree = ast.parse(inspect.getsource(queuey))
    checked = next(node for node in tree.body if isinstance(node, ast.If))
    imported = {
        alias.name: node.module
        for node in checked.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert imported == queuey._WHERE


def test_the_seed_prelude_names_are_exported() -> None:
    # seed 001's prelude: the traits, the values, the errors and DEFAULT_MAX_PRIORITY (10).
    assert queuey.DEFAULT_MAX_PRIORITY == 10

    class Defaults(queuey.QueueSet):
        q = queuey.Queue()

    assert Defaults.q.config.max_priority == queuey.DEFAULT_MAX_PRIORITY
    for name in ("QueueSet", "Job", "Producer", "Worker", "RetryPolicy", "Backoff", "Envelope"):
        assert name in queuey.__all__
