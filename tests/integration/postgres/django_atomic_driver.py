"""Drives sync enqueues inside and outside Django's ``transaction.atomic()`` in its own process
(the example shop's settings and job): one producer whose backend has no default connection,
one whose backend follows Django's (``default_connection=django.db.connection``). Prints one
JSON object: the job ids by case and the warnings raised (category, message, file).

Usage: ``python -m tests.integration.postgres.django_atomic_driver`` with
``QUEUEY_DATABASE_URL`` and ``QUEUEY_SCHEMA`` set.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from pathlib import Path
from typing import Any

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "django"


class Rollback(Exception):
    """Leaves an atomic block by rolling it back."""


def main() -> None:
    sys.path.insert(0, str(EXAMPLE))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection, transaction
    from shop.jobs import SendReceipt, ShopQueues

    from queuey import sync

    def producer(**options: Any) -> sync.Producer[ShopQueues]:
        backend = sync.PostgresBackend.connect(
            settings.DATABASE_URL, schema=settings.QUEUEY_SCHEMA, **options
        )
        return sync.Producer.create(ShopQueues, backend)

    plain, following = producer(), producer(default_connection=connection)
    ids: dict[str, str] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with transaction.atomic():
                ids["plain_in_rolled_back_block"] = plain.enqueue(SendReceipt(order_id=1))
                raise Rollback
        except Rollback:
            pass
        ids["plain_outside"] = plain.enqueue(SendReceipt(order_id=2))
        try:
            with transaction.atomic():
                ids["following_rolled_back"] = following.enqueue(SendReceipt(order_id=3))
                raise Rollback
        except Rollback:
            pass
        with transaction.atomic():
            ids["following_committed"] = following.enqueue(SendReceipt(order_id=4))
        ids["following_outside"] = following.enqueue(SendReceipt(order_id=5))
    shown = [(w.category.__name__, str(w.message), Path(w.filename).name) for w in caught]
    print(json.dumps({"ids": ids, "warnings": shown}), flush=True)


if __name__ == "__main__":
    main()
