"""Transports. The contract is in ``base``; the implementations are ``memory`` (ships with the
core), ``postgres`` and ``rabbitmq`` (imported explicitly so their drivers stay optional).

This package imports only the contract: import an implementation from its own module
(``from queuey.backends.memory import MemoryBackend``, or ``from queuey import MemoryBackend``).
"""

from __future__ import annotations

from queuey.backends.base import Backend, Consumer, Delivery

__all__ = ["Backend", "Consumer", "Delivery"]
