"""Enqueue from code with no event loop (Django, Flask, scripts): ``queuey.sync.Producer``, the
sync twin of ``queuey.Producer``, and the synchronous backends it publishes through.

```python
from queuey import sync

backend = sync.PostgresBackend.connect("postgresql://...")   # psycopg's synchronous pool
producer = sync.Producer.create(AppQueues, backend)
with transaction.atomic():                                  # Django on psycopg 3
    order = Order.objects.create(...)
    producer.enqueue(SendReceipt(order_id=order.pk), connection=django.db.connection)
```

- ``PostgresBackend`` (``queuey.backends.postgres.SyncPostgresBackend``): the same statements
  as the async backend on psycopg's synchronous ``ConnectionPool``; ``connection=`` takes the
  caller's psycopg ``Connection`` or Django's ``django.db.connection``, and the job commits or
  rolls back with the caller's transaction.
- ``ThreadedBackend``: any async backend (``RabbitMqBackend``, ``MemoryBackend``) run on an
  event loop in a thread: its own, or a running loop of another thread the backend belongs to.

Both are thread-safe: any number of threads may enqueue through one producer at once.

In Django, ``sync.PostgresBackend(..., default_connection=django.db.connection)`` makes every
enqueue that gives no ``connection=`` follow the calling thread's transaction. Without it, an
enqueue made inside an open ``transaction.atomic()`` block is written at once, outside the
block, and warns (``TransactionWarning``).
"""

from queuey._runtime.loop_thread import ThreadedBackend
from queuey._runtime.sync_producer import Producer
from queuey.backends.base import SyncBackend
from queuey.backends.postgres import SyncPostgresBackend as PostgresBackend
from queuey.errors import TransactionWarning

__all__ = ["PostgresBackend", "Producer", "SyncBackend", "ThreadedBackend", "TransactionWarning"]

for _exported in (Producer, ThreadedBackend):
    _exported.__module__ = __name__
