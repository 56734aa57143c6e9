"""Who may see and who may act: the dashboard's access decisions.

A request is checked in this order: 404 when ``view`` is private (the dashboard does not
exist); the caller comes from a credential header (``Authorization: Bearer``/``ApiKey`` or
``X-Api-Key``, as the publish endpoint reads them; 401 when invalid) or else from the session
cookie, which counts only while its session was not signed out (in any process) and the
key entry or token verifier that signed it in still stands unchanged (the authenticator's
``GrantChecker.honours``; a custom authenticator without it leaves that to the session's
lifetime); ``view`` decides (401 with no caller, which a page answers by sending the browser to
sign in; 403 for the wrong role or organisation class). An action further needs ``act`` (403
otherwise) and, when the caller came from the cookie, the session's CSRF token in the form
(403 otherwise). A caller from a header needs no CSRF token: a browser never adds one on its
own.
"""

from __future__ import annotations

from dataclasses import dataclass

import jwt
from starlette.exceptions import HTTPException
from starlette.requests import HTTPConnection

from queuey.dashboard.config import DashboardConfig
from queuey.dashboard.session import COOKIE, Session, SessionSigner, SignOutRecord
from queuey.http.auth import Authenticator, GrantChecker, InvalidCredentialsError, Principal
from queuey.http.authorization import authorize

__all__ = ["Caller", "Guard", "SignInRefused"]

NOT_FOUND = "not found"
BAD_CSRF = "the form is stale or did not come from this dashboard: reload the page and retry"


class SignInRefused(Exception):
    """Signing in failed; the message is shown on the sign-in page (never the credential)."""


@dataclass(frozen=True)
class Caller:
    """Who is asking, and what they may do.

    Attributes:
        principal: the caller, ``None`` when anonymous (a public ``view``).
        session: the browser session it came from, ``None`` for a credential header.
        can_act: whether ``act`` lets it act.
    """

    principal: Principal | None
    session: Session | None
    can_act: bool

    @property
    def name(self) -> str:
        """The id recorded in the audit log (``"anonymous"`` when none)."""
        return "anonymous" if self.principal is None else self.principal.id


class Guard:
    """Applies a ``DashboardConfig`` to requests.

    Args:
        config: who may view and act.
        authenticator: resolves credential headers (the publish endpoint's).
        signer: signs and reads session cookies.
        sign_outs: where signed-out sessions are recorded.
    """

    def __init__(
        self,
        config: DashboardConfig,
        authenticator: Authenticator,
        signer: SessionSigner,
        sign_outs: SignOutRecord,
    ) -> None:
        self.config, self.authenticator, self.signer = config, authenticator, signer
        self.sign_outs = sign_outs

    def require_enabled(self) -> None:
        """Raise 404 when the dashboard does not exist."""
        if not self.config.enabled:
            raise HTTPException(404, NOT_FOUND)

    async def caller(self, request: HTTPConnection) -> Caller:
        """The caller of ``request``, allowed to view.

        Raises:
            HTTPException: 404 private, 401 no or invalid credentials, 403 refused.
        """
        self.require_enabled()
        try:
            principal = await self.authenticator.authenticate(request)
        except InvalidCredentialsError as exc:
            raise HTTPException(401, str(exc)) from None
        session = None
        if principal is None:
            session = await self._live(self.signer.decode(request.cookies.get(COOKIE)))
            principal = None if session is None else session.principal
        refusal = authorize(self.config.view, principal)
        if refusal is not None:
            raise HTTPException(refusal.status, refusal.message)
        can_act = authorize(self.config.act, principal) is None
        return Caller(principal, session, can_act)

    async def _live(self, session: Session | None) -> Session | None:
        """``session`` while its grant stands and it was not signed out, else ``None``."""
        if session is None:
            return None
        checker = self.authenticator
        if isinstance(checker, GrantChecker) and not checker.honours(session.principal.grant):
            return None
        return None if await self.sign_outs.signed_out(session.sid) else session

    async def sign_out(self, session: Session) -> None:
        """End ``session`` for every process: its cookie is refused from now on."""
        await self.sign_outs.sign_out(session.sid, session.expires)

    def check_action(self, caller: Caller, csrf: str | None) -> None:
        """Allow ``caller`` to act with this form's CSRF token, or raise 403."""
        if not caller.can_act:
            raise HTTPException(403, "you may view this dashboard but not act in it")
        if caller.session is not None and not caller.session.csrf_matches(csrf):
            raise HTTPException(403, BAD_CSRF)

    async def sign_in(self, credential: str) -> Session:
        """A session for the holder of ``credential`` (a bearer JWT or an API key; a value of
        three dotted parts is tried as a token first), who must pass ``view``.

        Raises:
            SignInRefused: the credential does not verify, or may not view.
        """
        credential = credential.strip()
        schemes = ["Bearer", "ApiKey"] if credential.count(".") == 2 else ["ApiKey"]
        for scheme in schemes:
            header = f"{scheme} {credential}".encode()
            request = HTTPConnection({"type": "http", "headers": [(b"authorization", header)]})
            try:
                principal = await self.authenticator.authenticate(request)
            except InvalidCredentialsError:
                continue
            if principal is None or authorize(self.config.view, principal) is not None:
                raise SignInRefused("that key or token may not view this dashboard")
            ends_by = _token_expiry(credential) if scheme == "Bearer" else None
            return self.signer.new(principal, ends_by=ends_by)
        raise SignInRefused("that key or token was not accepted")


def _token_expiry(token: str) -> float | None:
    """The ``exp`` of a token the authenticator already verified (read, not re-verified)."""
    try:
        exp = jwt.decode(token, options={"verify_signature": False}).get("exp")
    except jwt.InvalidTokenError:
        return None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None
