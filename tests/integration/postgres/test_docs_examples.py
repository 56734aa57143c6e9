"""The documentation's PostgreSQL examples run against a real server, each in a schema of its
own, and their assertions hold (each example checks what its page says it does)."""

from __future__ import annotations

import pytest

from tests.doc_examples import ON_POSTGRES, load_example

pytestmark = pytest.mark.postgres


@pytest.mark.parametrize("name", ON_POSTGRES)
async def test_example_runs(
    name: str, database_url: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("QUEUEY_DATABASE_URL", database_url)
    monkeypatch.setenv("QUEUEY_SCHEMA", pg_schema)
    module = load_example(name, monkeypatch)
    await module.main()
