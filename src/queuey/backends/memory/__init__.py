"""The in-memory backend (``MemoryBackend``): a real backend held in process, for tests and the
demo, proven by the same conformance suite as PostgreSQL and RabbitMQ.

``_backend`` holds the public face, ``_store`` the queues, timers and in-flight count they all
share, and ``_consumer`` the consumers and deliveries, which work on the store, never on the
backend.
"""

from queuey.backends.memory._backend import MemoryBackend

__all__ = ["MemoryBackend"]

MemoryBackend.__module__ = __name__  # its public path, as before the package split
