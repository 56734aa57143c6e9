"""The RabbitMQ backend: classic queues with priorities (or replicated quorum
queues, ``RabbitMqOptions(queue_type="quorum")``), TTL hold queues that dead-letter back,
publisher confirms, and a connection that comes back after a restart.

```python
from queuey.backends.rabbitmq import RabbitMqBackend, RabbitMqOptions

backend = await RabbitMqBackend.connect("amqp://guest:guest@127.0.0.1:5672/")
```

Needs the ``rabbitmq`` extra (``pip install 'queuey-jobs[rabbitmq]'``: aio-pika, aiormq) and
RabbitMQ 3.10 or later; without the extra, importing this module raises an ``ImportError`` that
says so. Broker names per queue
``q``: ``q`` (main), ``q.dead`` (dead letters) and ``q.hold.<ms>`` (holds, one per delay);
topic queues are ``queuey-topic.<topic>`` (see ``_topology`` for the arguments).
"""

from queuey._extras import missing_extra

try:
    import aio_pika  # noqa: F401
    import aiormq  # noqa: F401
except ImportError as exc:
    raise missing_extra("the RabbitMQ backend", "rabbitmq", exc) from exc

from queuey.backends.rabbitmq._backend import RabbitMqBackend
from queuey.backends.rabbitmq._options import RabbitMqOptions

__all__ = ["RabbitMqBackend", "RabbitMqOptions"]
