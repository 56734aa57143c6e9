"""``Lifecycle``: whether the RabbitMQ backend is open. The backend opens and closes it; the
router checks it before every publish, so a delivery settled after ``close`` is refused the
same way a producer's publish is."""

from __future__ import annotations

from queuey.errors import ShutDownError

__all__ = ["Lifecycle"]


class Lifecycle:
    """Opened once, closed once, never reopened."""

    def __init__(self) -> None:
        self.opened = False
        self.closed = False

    def check_open(self) -> None:
        """Refuse work outside the open state.

        Raises:
            ShutDownError: closed, or not opened yet.
        """
        if self.closed:
            raise ShutDownError("the RabbitMQ backend is closed")
        if not self.opened:
            raise ShutDownError("the RabbitMQ backend is not open: use RabbitMqBackend.connect")
