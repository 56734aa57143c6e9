"""queuey's benchmark harness: queuey next to PgQueuer, procrastinate, Dramatiq, raw aio-pika and
the SQL limit, on the local PostgreSQL and RabbitMQ (issue 7).

Run it with ``python -m bench`` (``--quick`` for a reduced run under two minutes). Every
measurement runs in fresh child processes (``python -m bench.child``), so one system's imports,
pools and garbage never weigh on another's, and a worker's peak RSS is its own.
"""
