"""Drives the Django example (``examples/django``) in its own process, so Django's settings
never touch the test process: migrates its app, then places one order that commits and one that
rolls back through the real view, and prints the two responses as JSON lines.

Usage: ``python -m tests.integration.postgres.django_driver`` with ``QUEUEY_DATABASE_URL`` and
``QUEUEY_SCHEMA`` set.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "django"


def main() -> None:
    sys.path.insert(0, str(EXAMPLE))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "shop.settings")
    import django
    from django.core.management import call_command
    from django.test import Client

    django.setup()
    call_command("migrate", verbosity=0)
    client = Client()
    for path in ("/orders", "/orders?decline=1"):
        response = client.post(path, {"item": "book"})
        print(json.dumps({"status": response.status_code, "body": response.json()}), flush=True)


if __name__ == "__main__":
    main()
