"""The view that places an order and enqueues its receipt in the same transaction.

``queuey.sync.Producer`` needs no event loop. Its backend is built with
``default_connection=django.db.connection``, so every enqueue writes its row on Django's own
psycopg connection, inside the calling thread's ``transaction.atomic()`` block: if the block
rolls back, the job was never enqueued; once it commits, a worker runs it (the NOTIFY that wakes
the worker is sent at commit). ``enqueue(..., connection=connection)`` does the same for one
call.
"""

from __future__ import annotations

from functools import cache

from django.conf import settings
from django.db import connection, transaction
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST
from orders.models import Order

from queuey import sync
from shop.jobs import SendReceipt, ShopQueues


@cache
def producer() -> sync.Producer[ShopQueues]:
    """One producer per process (thread-safe), connected on first use."""
    backend = sync.PostgresBackend.connect(
        settings.DATABASE_URL,
        schema=settings.QUEUEY_SCHEMA,
        default_connection=connection,  # enqueues follow the thread's Django transaction
    )
    return sync.Producer.create(ShopQueues, backend)


class PaymentDeclinedError(Exception):
    """The example's stand-in for a failure after the order was written."""


@require_POST
def place_order(request: HttpRequest) -> JsonResponse:
    """Create an order and enqueue its receipt, all or nothing; ``?decline=1`` fails after both
    were written, so neither is kept."""
    try:
        with transaction.atomic():
            order = Order.objects.create(item=request.POST.get("item", "book"))
            job_id = producer().enqueue(SendReceipt(order_id=order.pk))
            if request.GET.get("decline"):
                raise PaymentDeclinedError(order.pk)
    except PaymentDeclinedError:
        return JsonResponse({"error": "payment declined; nothing was kept"}, status=402)
    return JsonResponse({"order": order.pk, "job": job_id}, status=201)
