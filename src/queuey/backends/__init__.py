"""Transports. The contract is in ``base``; the implementations are ``memory`` (ships with the
core), ``postgres`` and ``rabbitmq`` (imported explicitly so their drivers stay optional).

This package imports only the contract. ``from queuey.backends import MemoryBackend`` keeps
working: the name is imported from ``queuey.backends.memory`` on first use (prefer ``from
queuey import MemoryBackend``).
"""

from __future__ import annotations

from typing import Any

from queuey.backends.base import Backend, Consumer, Delivery

__all__ = ["Backend", "Consumer", "Delivery", "MemoryBackend"]


def __getattr__(name: str) -> Any:
    """``MemoryBackend``, imported on first use; any other missing name is an error."""
    if name == "MemoryBackend":
        from queuey.backends.memory import MemoryBackend

        return MemoryBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
