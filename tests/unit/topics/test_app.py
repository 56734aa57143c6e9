"""``App``: registering functions by decorator and through ``[functions]`` import paths."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from queuey.errors import ConfigError
from queuey.topics import App, MessageContext, QueuesConfig
from queuey.topics.function import make_function


@pytest.fixture
def module_name() -> Iterator[str]:
    """A module name no other test uses; forgotten afterwards."""
    name = f"qt_handlers_{uuid.uuid4().hex[:8]}"
    yield name
    sys.modules.pop(name, None)


def test_the_decorator_registers_by_name_in_every_form() -> None:
    app = App()

    @app.function
    def plain(payload: Any) -> None: ...

    @app.function("renamed")
    async def original(payload: Any, context: MessageContext) -> None: ...

    @app.function(name="by_keyword")
    def third(payload: Any) -> None: ...

    @app.function()
    def fourth(payload: Any) -> None: ...

    assert sorted(app.functions) == ["by_keyword", "fourth", "plain", "renamed"]
    assert app.functions["plain"].call is plain
    assert app.functions["renamed"].call is original
    assert app.functions["renamed"].is_async
    assert app.functions["renamed"].takes_context
    assert not app.functions["plain"].is_async
    assert not app.functions["plain"].takes_context


def test_a_name_taken_by_another_callable_is_refused() -> None:
    app = App()

    @app.function
    def send(payload: Any) -> None: ...

    app.register("send", send)  # the same callable again: nothing happens
    with pytest.raises(ConfigError, match="`send` is registered twice"):

        @app.function("send")
        def other(payload: Any) -> None: ...


@pytest.mark.parametrize("target", [3, None, "f"])
def test_a_non_callable_is_refused(target: Any) -> None:
    with pytest.raises(TypeError, match="not callable"):
        make_function("f", target)


def test_a_function_must_take_the_payload() -> None:
    def nothing() -> None: ...

    with pytest.raises(TypeError, match="must take the payload"):
        App().register("nothing", nothing)


def test_an_empty_name_is_refused() -> None:
    with pytest.raises(ConfigError):
        App().register("  ", lambda payload: None)


def test_arguments_follow_the_signature() -> None:
    context = MessageContext("t", "id", "f", 1, "")

    class Handler:
        async def __call__(self, payload: Any, context: MessageContext) -> None: ...

    def star(*args: Any) -> None: ...

    handler = make_function("h", Handler())
    assert handler.is_async
    assert handler.arguments({"a": 1}, context) == ({"a": 1}, context)
    assert make_function("s", star).arguments(1, context) == (1, context)
    assert make_function("p", lambda payload: None).arguments(1, context) == (1,)
    assert make_function("k", lambda payload, *, x=1: None).arguments(1, context) == (1,)


def test_include_adds_another_apps_functions() -> None:
    first, second = App(), App()

    @second.function
    def extra(payload: Any) -> None: ...

    first.include(second)
    assert first.functions["extra"].call is extra


def test_a_later_registration_is_seen_by_an_existing_subscriber() -> None:
    from queuey import MemoryBackend

    app = App(QueuesConfig(subscribe={"t": "late"}))
    subscriber = app.subscriber(MemoryBackend())
    assert subscriber.missing_functions() == [("t", "late")]
    app.register("late", lambda payload: None)
    assert subscriber.missing_functions() == []


def write_app(tmp_path: Path, module: str, functions: str, code: str) -> Path:
    (tmp_path / f"{module}.py").write_text(code, encoding="utf-8")
    path = tmp_path / "app.toml"
    path.write_text(f'[queues.subscribe]\n"t" = "send"\n\n[functions]\n{functions}\n')
    return path


def test_functions_are_imported_relative_to_the_file(tmp_path: Path, module_name: str) -> None:
    code = (
        "def send(payload):\n    return payload\n\n"
        "class Ns:\n    @staticmethod\n    def f(p): ...\n"
    )
    path = write_app(
        tmp_path, module_name, f'send = "{module_name}:send"\nnested = "{module_name}:Ns.f"', code
    )
    app = App.load(path)
    assert sorted(app.functions) == ["nested", "send"]
    assert app.functions["send"].call("x") == "x"
    assert app.config.subscribers("t") == ("send",)
    assert app.app_config is not None and app.app_config.path == path


@pytest.mark.parametrize(
    ("entry", "code", "message"),
    [
        ('send = "qt_no_such_module_x:send"', "", "cannot import 'qt_no_such_module_x'"),
        ('send = "{m}:missing"', "def send(p): ...\n", "has no attribute 'missing'"),
        ('send = "{m}:VALUE"', "VALUE = 3\n", "is not callable"),
        ('send = "{m}:send"', "raise RuntimeError('boom at import')\n", "boom at import"),
        ('send = "{m}:send"', "def send(): ...\n", "must take the payload"),
    ],
)
def test_import_problems_name_the_file_and_the_key(
    tmp_path: Path, module_name: str, entry: str, code: str, message: str
) -> None:
    path = write_app(tmp_path, module_name, entry.format(m=module_name), code)
    with pytest.raises(ConfigError) as caught:
        App.load(path)
    assert str(caught.value).startswith(f"{path}: functions.send: ")
    assert message in str(caught.value)


def test_database_url_comes_from_the_file(tmp_path: Path) -> None:
    path = tmp_path / "app.toml"
    path.write_text('[database]\nurl = "postgresql://h/db"\n')
    assert App.load(path).database_url == "postgresql://h/db"
    assert App().database_url is None
