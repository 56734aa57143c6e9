"""Topics: a ``[queues]`` TOML table maps a topic to subscriber functions;
``publish`` records one message per subscriber, each with its own retries."""

from queuey.topics.app import App
from queuey.topics.appfile import AppConfig, load_app_config
from queuey.topics.config import QueuesConfig
from queuey.topics.function import Function, MessageContext
from queuey.topics.publication import InvalidTopicError, Publication, Publisher
from queuey.topics.publisher import TopicPublisher
from queuey.topics.subscriber import Subscriber

__all__ = [
    "App",
    "AppConfig",
    "Function",
    "InvalidTopicError",
    "MessageContext",
    "Publication",
    "Publisher",
    "QueuesConfig",
    "Subscriber",
    "TopicPublisher",
    "load_app_config",
]
