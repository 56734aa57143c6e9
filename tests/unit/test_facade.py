"""The public facade is exactly what ``__all__`` lists."""

import queuey


def test_all_is_sorted_and_complete() -> None:
    public = {name for name in vars(queuey) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(queuey, name)).__name__ == "module"}
    assert sorted(queuey.__all__) == queuey.__all__
    assert set(queuey.__all__) == public - modules
