"""The shop's queues and jobs, shared by the Django views (which enqueue) and the worker."""

from __future__ import annotations

from queuey import Job, Queue, QueueSet, RetryPolicy


class ShopQueues(QueueSet, prefix="shop"):
    receipts = Queue(retry=RetryPolicy.exponential(max_attempts=5, base="1s", max="1m"))


class SendReceipt(Job[ShopQueues], queue=ShopQueues.receipts, name="shop.SendReceipt"):
    order_id: int
