"""Topics (seed ``000``): a ``[queues]`` TOML table maps a topic to subscriber functions;
``publish`` records one message per subscriber, each with its own retries."""

from queuey.topics.publication import InvalidTopicError, Publication, Publisher

__all__ = ["InvalidTopicError", "Publication", "Publisher"]
