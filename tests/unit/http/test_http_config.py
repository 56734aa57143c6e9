"""``HttpConfig.from_table``: defaults, every key, and errors naming the key and the file."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from queuey.errors import ConfigError
from queuey.http import ApiKeyConfig, HttpConfig, JwtConfig, api_key_digest
from tests.unit.http.http_fakes import SECRET

PATH = Path("conf/app.toml")
DIGEST = api_key_digest("k")


def parse(text: str) -> HttpConfig:
    return HttpConfig.from_table(tomllib.loads(text).get("http", {}), PATH)


def public_pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> str:
    return (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def test_defaults() -> None:
    config = parse("")
    assert config == HttpConfig(base="", max_body_bytes=1048576, jwt=None, api_keys=())


def test_the_issue_example() -> None:
    config = parse(
        f"""
        [http]
        base = "/api"
        max_body_bytes = 1048576
        [http.jwt]
        secret = "{SECRET}"
        audience = "queuey"
        [[http.api_keys]]
        id = "ops-bot"
        roles = ["ops"]
        sha256 = "{DIGEST.upper()}"
        [[http.api_keys]]
        id = "staff-bot"
        sha256 = "{api_key_digest("other")}"
        org = "acme"
        org_class = "staff"
        """
    )
    assert config.base == "/api"
    assert config.jwt == JwtConfig(audience="queuey", secret=SECRET)
    assert config.api_keys[0] == ApiKeyConfig("ops-bot", DIGEST, frozenset({"ops"}))
    assert config.api_keys[1].org_class == "staff"


def test_an_rs256_public_key() -> None:
    pem = public_pem(rsa.generate_private_key(public_exponent=65537, key_size=2048))
    config = parse(f'[http.jwt]\npublic_key = """{pem}"""\naudience = "q"')
    assert config.jwt is not None and config.jwt.public_key == pem


@pytest.mark.parametrize(("given", "base"), [("/", ""), ("/api/", "/api"), ("/a/b", "/a/b")])
def test_base_is_normalised(given: str, base: str) -> None:
    assert parse(f'[http]\nbase = "{given}"').base == base


def test_repr_hides_secrets() -> None:
    config = HttpConfig(
        jwt=JwtConfig(audience="q", secret=SECRET), api_keys=(ApiKeyConfig("k", DIGEST),)
    )
    assert SECRET not in repr(config)
    assert DIGEST not in repr(config)


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ({"bse": "/api"}, "[http] bse: unknown key"),
        ({"base": 3}, "[http] base: expected a string"),
        ({"base": "api"}, "[http] base: 'api' is not a path"),
        ({"base": "/a/{x}"}, "[http] base:"),
        ({"base": "/a b"}, "[http] base:"),
        ({"base": "//a"}, "[http] base:"),
        ({"max_body_bytes": "1MB"}, "[http] max_body_bytes: expected an integer >= 1"),
        ({"max_body_bytes": 0}, "[http] max_body_bytes: expected an integer >= 1"),
        ({"max_body_bytes": True}, "[http] max_body_bytes: expected an integer >= 1"),
        ({"jwt": "secret"}, "[http] jwt: expected a table"),
        ({"jwt": {"secret": SECRET}}, "[http.jwt] audience: is required"),
        ({"jwt": {"audience": "q"}}, "[http.jwt] secret: give exactly one"),
        ({"jwt": {"audience": " ", "secret": SECRET}}, "[http.jwt] audience: is required"),
        ({"jwt": {"audience": "q", "secret": "short"}}, "[http.jwt] secret: must be at least 32"),
        ({"jwt": {"audience": "q", "secret": SECRET, "public_key": "x"}}, "[http.jwt] secret:"),
        ({"jwt": {"audience": "q", "public_key": "nope"}}, "[http.jwt] public_key: is not a PEM"),
        ({"jwt": {"audience": "q", "secret": SECRET, "aud": "q"}}, "[http.jwt] aud: unknown"),
        ({"api_keys": {"id": "x"}}, "[http] api_keys: expected an array of tables"),
        ({"api_keys": ["x"]}, "[[http.api_keys]] #1: expected a table"),
        ({"api_keys": [{"sha256": DIGEST}]}, "[[http.api_keys]] #1 id: is required"),
        ({"api_keys": [{"id": "a"}]}, "[[http.api_keys]] #1 sha256: expected the key's SHA-256"),
        ({"api_keys": [{"id": "a", "sha256": "abc"}]}, "[[http.api_keys]] #1 sha256:"),
        ({"api_keys": [{"id": "a", "sha256": DIGEST, "key": "x"}]}, "#1 key: unknown key"),
        ({"api_keys": [{"id": "a", "sha256": DIGEST, "roles": "ops"}]}, "#1 roles: expected a"),
        ({"api_keys": [{"id": "a", "sha256": DIGEST, "roles": [""]}]}, "#1 roles: must not"),
        ({"api_keys": [{"id": "a", "sha256": DIGEST, "org_class": "s"}]}, "#1 org_class: needs"),
        ({"api_keys": [{"id": "a", "sha256": DIGEST}] * 2}, "[http] api_keys: two keys share"),
    ],
)
def test_errors_name_the_key_and_the_file(table: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        HttpConfig.from_table(table, PATH)
    assert str(caught.value).startswith(f"{PATH}: ")
    assert key in str(caught.value)
    assert SECRET not in str(caught.value)


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: HttpConfig(base="api"), "base: 'api' is not a path"),
        (lambda: HttpConfig(base="/api/"), "base: '/api/' is not a path"),
        (lambda: HttpConfig(max_body_bytes=0), "max_body_bytes: expected an integer >= 1"),
        (lambda: JwtConfig(audience="q"), "secret: give exactly one"),
        (lambda: JwtConfig(audience="", secret=SECRET), "audience: is required"),
        (lambda: ApiKeyConfig("k", DIGEST.upper()), "sha256: expected"),
        (lambda: ApiKeyConfig("", DIGEST), "id: is required"),
        (lambda: ApiKeyConfig("k", DIGEST, org=""), "org: must not be empty"),
        (lambda: ApiKeyConfig("k", DIGEST, frozenset({" "})), "roles: must not contain"),
    ],
)
def test_values_built_in_python_are_checked_too(build: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=f"^{re.escape(message)}"):
        build()


def test_a_non_rsa_public_key_is_refused() -> None:
    pem = public_pem(ec.generate_private_key(ec.SECP256R1()))
    with pytest.raises(ConfigError, match="is not an RSA public key"):
        HttpConfig.from_table({"jwt": {"audience": "q", "public_key": pem}}, PATH)


def test_a_short_secret_is_not_echoed() -> None:
    with pytest.raises(ConfigError) as caught:
        HttpConfig.from_table({"jwt": {"audience": "q", "secret": "hunter2"}}, PATH)
    assert "hunter2" not in str(caught.value)


def test_a_table_that_is_not_a_table() -> None:
    with pytest.raises(ConfigError, match=r"conf/app.toml: \[http\]: expected a table"):
        HttpConfig.from_table("x", PATH)  # type: ignore[arg-type]
