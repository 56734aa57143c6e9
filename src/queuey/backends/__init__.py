"""Transports. The contract is in ``base``; ``memory`` ships with the core, while
``postgres`` and ``rabbitmq`` are imported explicitly so their drivers stay optional."""

from queuey.backends.base import Backend, Consumer, Delivery
from queuey.backends.memory import MemoryBackend

__all__ = ["Backend", "Consumer", "Delivery", "MemoryBackend"]
