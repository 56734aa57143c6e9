"""Settings of the example shop: one PostgreSQL database (Django on psycopg 3), read from
``QUEUEY_DATABASE_URL``; Django's tables and queuey's live in the schema ``QUEUEY_SCHEMA``
(default "queuey")."""

from __future__ import annotations

import os
from urllib.parse import unquote, urlsplit

DATABASE_URL = os.environ.get("QUEUEY_DATABASE_URL", "postgresql://postgres@127.0.0.1:5432/shop")
QUEUEY_SCHEMA = os.environ.get("QUEUEY_SCHEMA", "queuey")

_url = urlsplit(DATABASE_URL)

SECRET_KEY = "example-only-not-secret"
DEBUG = False
ALLOWED_HOSTS = ["*"]
ROOT_URLCONF = "shop.urls"
INSTALLED_APPS = ["orders"]
MIDDLEWARE: list[str] = []
USE_TZ = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.postgresql",  # psycopg 3 when it is installed
        "NAME": _url.path.lstrip("/"),
        "USER": unquote(_url.username or ""),
        "PASSWORD": unquote(_url.password or ""),
        "HOST": _url.hostname or "",
        "PORT": str(_url.port or ""),
        "OPTIONS": {"options": f"-c search_path={QUEUEY_SCHEMA}"},
    }
}
