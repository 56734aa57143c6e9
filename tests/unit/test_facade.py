"""The public facade is exactly what ``__all__`` lists."""

import queuey


def test_all_is_sorted_and_complete() -> None:
    public = {name for name in vars(queuey) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(queuey, name)).__name__ == "module"}
    assert sorted(queuey.__all__) == queuey.__all__
    assert set(queuey.__all__) == public - modules


def test_the_seed_prelude_names_are_exported() -> None:
    # seed 001's prelude: the traits, the values, the errors and DEFAULT_MAX_PRIORITY (10).
    assert queuey.DEFAULT_MAX_PRIORITY == 10

    class Defaults(queuey.QueueSet):
        q = queuey.Queue()

    assert Defaults.q.config.max_priority == queuey.DEFAULT_MAX_PRIORITY
    for name in ("QueueSet", "Job", "Producer", "Worker", "RetryPolicy", "Backoff", "Envelope"):
        assert name in queuey.__all__
