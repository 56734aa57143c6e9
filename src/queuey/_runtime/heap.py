"""Taking a long-running worker's start-up heap out of the garbage collector's view.

A worker allocates a few container objects per job (its task, futures, the job's model and
context), so CPython's cyclic collector runs often, and every full collection walks every object
still alive, the imported modules, pydantic's schemas and the driver's types included: on a
no-op PostgreSQL drain that walk was 15-20% of the worker's CPU (``python -m bench``, see
docs/benchmarks.md). ``gc.freeze()`` moves every object alive at start-up into a permanent
generation that collections skip; objects are still freed by reference counting as before,
and only cyclic garbage already present when it is called would stay (a ``gc.collect()`` first
leaves none). This is what the Python documentation advises for long-running servers
(``gc.freeze``), done by ``queuey worker`` and ``queuey run`` once everything is imported.
"""

from __future__ import annotations

import gc

__all__ = ["freeze_heap"]


def freeze_heap() -> None:
    """Collect once, then freeze every object alive now (``gc.freeze()``): later collections
    walk only what is allocated from here on. Call it once per process, after start-up."""
    gc.collect()
    gc.freeze()
