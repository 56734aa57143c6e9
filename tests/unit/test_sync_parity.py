"""The sync twin cannot drift: ``queuey.sync.Producer`` has exactly the public
methods of ``queuey.Producer``, each with the same parameters (names, kinds, defaults), sync
where the async one is a coroutine; and ``SyncBackend`` mirrors the publishing half of
``Backend`` the same way."""

from __future__ import annotations

import inspect
from typing import Any

import queuey
from queuey import sync
from queuey.backends.base import Backend, SyncBackend


def _public(cls: type[Any]) -> dict[str, Any]:
    return {
        name: member
        for name, member in vars(cls).items()
        if not name.startswith("_") and callable(getattr(cls, name))
    }


def _shape(function: Any) -> list[tuple[str, Any, Any]]:
    """Each parameter's name, kind and default (annotations differ: the backend types)."""
    function = getattr(function, "__func__", function)
    return [(p.name, p.kind, p.default) for p in inspect.signature(function).parameters.values()]


def _is_async(function: Any) -> bool:
    return inspect.iscoroutinefunction(getattr(function, "__func__", function))


def test_the_sync_producer_has_the_async_producers_methods() -> None:
    async_methods, sync_methods = _public(queuey.Producer), _public(sync.Producer)
    assert sorted(sync_methods) == sorted(async_methods)
    assert {"enqueue", "enqueue_after", "defer", "enqueue_many", "cancel"} <= set(async_methods)


def test_each_method_takes_the_same_parameters() -> None:
    for name, method in _public(queuey.Producer).items():
        twin = vars(sync.Producer)[name]
        assert _shape(twin) == _shape(method), name
        assert isinstance(twin, classmethod) == isinstance(method, classmethod), name


def test_the_sync_twin_never_returns_a_coroutine() -> None:
    for name, method in _public(sync.Producer).items():
        assert not _is_async(method), name
    coroutines = {name for name, method in _public(queuey.Producer).items() if _is_async(method)}
    assert coroutines == {
        "create",
        "enqueue",
        "enqueue_after",
        "defer",
        "enqueue_many",
        "cancel",
        "job",
        "result",
        "enqueue_workflow",
        "workflow",
        "cancel_workflow",
    }


def test_the_sync_backend_mirrors_the_publishing_half_of_the_backend() -> None:
    publishing = {"declare", "publish", "defer", "cancel", "close"}
    assert set(_public(SyncBackend)) == publishing
    for name in publishing:
        assert _shape(vars(SyncBackend)[name]) == _shape(vars(Backend)[name]), name


def test_both_sync_backends_implement_the_protocol() -> None:
    for implementation in (sync.PostgresBackend, sync.ThreadedBackend):
        for name in _public(SyncBackend):
            theirs = getattr(implementation, name)
            assert _shape(theirs) == _shape(vars(SyncBackend)[name]), (implementation, name)
            assert not _is_async(theirs)
