"""One line at each end of an outage, whatever the driver underneath logs: psycopg's pool and
aiormq's per-attempt records about queuey's connections become DEBUG records (dropped unless
their logger shows DEBUG), the records of other pools are left alone, and the parts of one
PostgreSQL outage (the pool, the LISTEN connection) make one WARNING and one INFO.

The library records are simulated here, logged with the drivers' own loggers and format
strings; ``tests/integration/postgres/test_outage_logs.py`` cuts a real connection."""

from __future__ import annotations

import logging

import pytest

from queuey.backends.postgres._outage import POOLED, Outage, quiet_pool_logs
from queuey.backends.rabbitmq._connection import quiet_driver_logs

REFUSED = OSError("connection refused")


class FakeConnection:
    """Stands for a psycopg connection in a record's arguments."""

    def __str__(self) -> str:
        return "<psycopg.AsyncConnection [BAD]>"


def pool_records() -> None:
    """What psycopg's pool logs while a queuey pool reconnects, and once for another pool."""
    pool = logging.getLogger("psycopg.pool")
    ours = FakeConnection()
    POOLED.add(ours)
    for _ in range(6):
        pool.warning("error connecting in %r: %s", "queuey host:1:ab", REFUSED)
    pool.warning("discarding broken connection: %s", ours)
    pool.warning("discarding closed connection: %s", ours)
    pool.warning("reconnection attempt in pool %r failed after %s sec", "queuey host:1:ab", 300)
    pool.warning("error connecting in %r: %s", "pool-1", REFUSED)  # the application's own pool
    pool.warning("discarding broken connection: %s", FakeConnection())  # not from our pools


def test_psycopg_pool_reconnection_warnings_of_queuey_pools_are_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet_pool_logs()
    quiet_pool_logs()  # installed once
    caplog.set_level(logging.INFO)
    pool_records()
    assert [r.getMessage() for r in caplog.records] == [
        "error connecting in 'pool-1': connection refused",
        "discarding broken connection: <psycopg.AsyncConnection [BAD]>",
    ]
    assert len(logging.getLogger("psycopg.pool").filters) == 1


def test_psycopg_pool_reconnection_warnings_are_kept_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    quiet_pool_logs()
    caplog.set_level(logging.DEBUG, logger="psycopg.pool")
    pool_records()
    levels = [r.levelname for r in caplog.records]
    assert levels == ["DEBUG"] * 9 + ["WARNING", "WARNING"]
    assert caplog.records[0].getMessage() == "error connecting in 'queuey host:1:ab': " + str(
        REFUSED
    )


def test_aiormq_connect_and_close_errors_are_dropped(caplog: pytest.LogCaptureFixture) -> None:
    quiet_driver_logs()
    caplog.set_level(logging.INFO)
    driver = logging.getLogger("aiormq.connection")
    for _ in range(4):
        driver.error("error when creating transport: %r", ConnectionRefusedError(111, "refused"))
    driver.error(
        'Unexpected connection close from remote "%s", '
        "Connection.Close(reply_code=%r, reply_text=%r)",
        "amqp://guest:******@127.0.0.1:5672/",
        320,
        "CONNECTION_FORCED - broker forced connection closure with reason 'shutdown'",
    )
    driver.error("Unexpected frame %r", "frame")  # not an outage's: kept
    assert [r.getMessage() for r in caplog.records] == ["Unexpected frame 'frame'"]


def test_one_postgres_outage_over_its_parts_is_one_line_at_each_end(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="queuey.postgres")
    woken: list[bool] = []
    database = Outage("PostgreSQL", lambda: woken.append(True))
    listen = database.part("the LISTEN connection")
    listen.failed(OSError("server closed the connection unexpectedly\n\tThis probably means"))
    database.failed(REFUSED)
    listen.failed(REFUSED)
    assert database.down and listen.down
    listen.recovered()
    assert database.down and woken == []
    database.recovered()
    database.recovered()
    assert not database.down and woken == [True]
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        (
            "WARNING",
            "PostgreSQL (the LISTEN connection) failed: server closed the connection "
            "unexpectedly This probably means (retrying quietly until it is back)",
        ),
        ("INFO", "PostgreSQL is back"),
    ]
