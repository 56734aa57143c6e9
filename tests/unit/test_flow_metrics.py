"""The memory backend counts what its flow limits hold back, as PostgreSQL's claim does (the
same scenario as the PostgreSQL test)."""

from __future__ import annotations

from queuey.backends.memory import MemoryBackend
from tests.integration.postgres.test_flow_visibility import throttled_claims_are_counted


async def test_a_capped_queue_counts_its_throttled_claims_in_memory() -> None:
    await throttled_claims_are_counted(MemoryBackend())
