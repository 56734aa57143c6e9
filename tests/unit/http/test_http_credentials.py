"""The built-in authenticator: bearer JWTs (HS256, RS256) and API keys."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.requests import HTTPConnection

from queuey.http import (
    ApiKeyTable,
    BearerVerifier,
    CredentialAuthenticator,
    HttpConfig,
    InvalidCredentialsError,
    JwtConfig,
    Principal,
)
from tests.unit.http.http_fakes import AUDIENCE, OPS_KEY, SECRET, STAFF_KEY, http_config, token

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_PUBLIC = (
    RSA_KEY.public_key()
    .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    .decode()
)


def request(*headers: tuple[str, str]) -> HTTPConnection:
    raw = [(name.lower().encode(), value.encode("latin-1")) for name, value in headers]
    return HTTPConnection({"type": "http", "headers": raw})


async def authenticate(*headers: tuple[str, str], config: HttpConfig | None = None) -> Any:
    authenticator = CredentialAuthenticator.from_config(config or http_config())
    return await authenticator.authenticate(request(*headers))


async def refusal(*headers: tuple[str, str], config: HttpConfig | None = None) -> str:
    with pytest.raises(InvalidCredentialsError) as caught:
        await authenticate(*headers, config=config)
    return str(caught.value)


async def test_no_credential_is_anonymous() -> None:
    assert await authenticate(("Accept", "application/json")) is None


async def test_a_bearer_token_maps_its_claims() -> None:
    value = token(sub="u1", roles=["ops", "billing"], org="acme", org_class="staff")
    assert await authenticate(("Authorization", f"Bearer {value}")) == Principal(
        "u1", frozenset({"ops", "billing"}), "acme", "staff"
    )
    lower = await authenticate(("Authorization", f"bearer   {value}  "))
    assert lower.id == "u1"


async def test_roles_org_and_class_are_optional() -> None:
    value = token(roles=None)
    assert await authenticate(("Authorization", f"Bearer {value}")) == Principal("alice")


async def test_an_rs256_token_verifies_with_the_public_key() -> None:
    config = HttpConfig(jwt=JwtConfig(audience=AUDIENCE, public_key=RSA_PUBLIC))
    value = token(key=RSA_KEY, algorithm="RS256")
    principal = await authenticate(("Authorization", f"Bearer {value}"), config=config)
    assert principal.id == "alice"
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = token(key=other, algorithm="RS256")
    header = ("Authorization", f"Bearer {forged}")
    assert await refusal(header, config=config) == "the bearer token is not valid"


async def test_rs256_refuses_an_hs256_token_signed_with_the_public_key() -> None:
    config = HttpConfig(jwt=JwtConfig(audience=AUDIENCE, public_key=RSA_PUBLIC))
    claims = {"sub": "x", "aud": AUDIENCE, "exp": int(time.time()) + 60}
    segments = [_b64(json.dumps(part).encode()) for part in ({"alg": "HS256"}, claims)]
    signed = ".".join(segments).encode()
    signature = hmac.new(RSA_PUBLIC.encode(), signed, hashlib.sha256).digest()
    forged = f"{signed.decode()}.{_b64(signature)}"
    header = ("Authorization", f"Bearer {forged}")
    assert await refusal(header, config=config) == "the bearer token is not valid"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (token(exp_in=-5), "the bearer token has expired"),
        (token(exp_in=None), "the bearer token has no `exp` claim"),
        (token(sub=None), "the bearer token has no `sub` claim"),
        (token(aud=None), "the bearer token has no `aud` claim"),
        (token(aud="billing"), "the bearer token is for another audience"),
        (token(key="another-secret-another-secret-xx"), "the bearer token is not valid"),
        (token(nbf=int(time.time()) + 86400), "the bearer token is not valid"),
        (token(sub=""), "the bearer token's `sub` claim is not a non-empty string"),
        (token(roles="ops"), "the bearer token's `roles` claim is not a list"),
        (token(roles=[1]), "the bearer token's `roles` claim is not a list of strings"),
        (token(org=7), "the bearer token's `org` claim is not a string"),
        (token(org_class=""), "the bearer token's `org_class` claim is not a string"),
        (jwt.encode({"sub": "a", "aud": AUDIENCE}, "", algorithm="none"), "is not valid"),
        ("not.a.jwt", "the bearer token is not valid"),
        ("garbage", "the bearer token is not valid"),
    ],
)
async def test_an_invalid_bearer_token_is_refused_without_echo(value: str, message: str) -> None:
    text = await refusal(("Authorization", f"Bearer {value}"))
    assert message in text
    assert value not in text


async def test_api_keys_by_either_header() -> None:
    ops = Principal("ops-bot", frozenset({"ops"}))
    assert await authenticate(("Authorization", f"ApiKey {OPS_KEY}")) == ops
    assert await authenticate(("Authorization", f"apikey {OPS_KEY}")) == ops
    assert await authenticate(("X-Api-Key", OPS_KEY)) == ops
    staff = await authenticate(("X-Api-Key", STAFF_KEY))
    assert (staff.id, staff.org, staff.org_class) == ("staff-bot", "acme", "staff")


@pytest.mark.parametrize(
    ("headers", "message"),
    [
        ([("X-Api-Key", "wrong")], "unknown API key"),
        ([("Authorization", "ApiKey wrong")], "unknown API key"),
        ([("Authorization", f"ApiKey {OPS_KEY}x")], "unknown API key"),
        ([("X-Api-Key", "")], "the credential is empty"),
        ([("Authorization", "Bearer")], "the credential is empty"),
        ([("Authorization", "Bearer   ")], "the credential is empty"),
        ([("Authorization", "")], "unsupported Authorization scheme"),
        ([("Authorization", f"Basic {OPS_KEY}")], "unsupported Authorization scheme"),
        ([("Authorization", OPS_KEY)], "unsupported Authorization scheme"),
        ([("X-Api-Key", OPS_KEY), ("Authorization", f"ApiKey {OPS_KEY}")], "send one credential"),
        ([("X-Api-Key", OPS_KEY), ("X-Api-Key", OPS_KEY)], "send one credential"),
    ],
)
async def test_a_bad_credential_is_refused_without_echo(
    headers: list[tuple[str, str]], message: str
) -> None:
    text = await refusal(*headers)
    assert message in text
    assert OPS_KEY not in text


async def test_kinds_the_configuration_does_not_accept_are_refused() -> None:
    bare = HttpConfig()
    header = ("Authorization", f"Bearer {token()}")
    assert await refusal(header, config=bare) == "bearer tokens are not accepted here"
    assert await refusal(("X-Api-Key", OPS_KEY), config=bare) == "API keys are not accepted here"


def test_reprs_hide_keys() -> None:
    authenticator = CredentialAuthenticator.from_config(http_config())
    assert SECRET not in repr(authenticator)
    assert "ops-bot" in repr(authenticator)


def test_a_verifier_needs_exactly_one_good_key() -> None:
    with pytest.raises(ValueError):
        BearerVerifier(AUDIENCE)
    with pytest.raises(ValueError):
        BearerVerifier(AUDIENCE, secret=SECRET, public_key=RSA_PUBLIC)
    with pytest.raises(ValueError):
        BearerVerifier(AUDIENCE, secret="short")
    assert not ApiKeyTable([])
