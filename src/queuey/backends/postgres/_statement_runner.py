"""``StatementRunner``: what the statement groups that make up ``Store`` (``_settles``,
``_enqueue_statements``, ``_claim_statements``, ``_inspections``, ``_schema_statements``,
``_schedule_statements``) need of it: its composed
statements, its identity and channel, and running a named statement under its error policy.
Each group is a class of methods that subclasses it (``_settles`` annotates ``self`` instead);
``Store`` inherits them all and implements it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from psycopg import sql
from psycopg.rows import AsyncRowFactory

from queuey.backends.postgres._flow import FlowClaims
from queuey.backends.postgres._pool import Connection, Connections
from queuey.backends.postgres._sql import Statements

__all__ = ["StatementRunner"]

R = TypeVar("R")


class StatementRunner(Protocol):
    """``Store`` as its statement groups see it (see the module)."""

    statements: Statements
    owner: str
    channel: str
    lease: float
    flow: FlowClaims

    def _where(self) -> Connections: ...

    async def _answered(self, work: Callable[[Connection], Awaitable[R]], count: int) -> R: ...

    async def _run(
        self,
        statement: sql.SQL | sql.Composed,
        params: dict[str, Any] | None,
        rows: AsyncRowFactory[R],
        timeout: float | None = None,
        *,
        claim: bool = False,
        first: sql.SQL | None = None,
    ) -> tuple[list[R], int]: ...

    async def _fetch(
        self,
        name: str,
        params: dict[str, Any] | None,
        rows: AsyncRowFactory[R],
        timeout: float | None = None,
    ) -> list[R]: ...

    async def _count(
        self, name: str, params: dict[str, Any] | None, timeout: float | None = None
    ) -> int: ...
