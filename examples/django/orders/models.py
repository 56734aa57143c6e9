"""An order, and whether its receipt was sent (set by the queuey worker)."""

from __future__ import annotations

from django.db import models


class Order(models.Model):
    """One order of one item."""

    item = models.CharField(max_length=100)
    receipt_sent = models.BooleanField(default=False)
