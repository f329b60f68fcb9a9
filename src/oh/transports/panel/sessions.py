"""Browser sessions for the panel: signed session cookies, CSRF tokens, owner resolution.

An owner signs in by pasting their owner token once; the panel checks it with the host and sets
a cookie holding a *signed session value*, never the token: ``<payload>.<mac>`` where the
payload (base64url JSON) names the owner, a random session nonce and an expiry, and the mac is
HMAC-SHA256 over it with the host secret. No server-side session table is needed, and a cookie
whose owner, nonce or expiry was altered fails the constant-time mac check.

Every state-changing form carries a CSRF token derived from the session nonce (HMAC again),
checked with ``hmac.compare_digest``. The login form, which has no session yet, uses a signed
double-submit nonce in a short-lived cookie of its own.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from oh.errors import Unauthenticated
from oh.host import bearer_token

if TYPE_CHECKING:
    from fastapi import Request

    from oh.host import Host

__all__ = [
    "LOGIN_COOKIE",
    "SESSION_COOKIE",
    "SESSION_LIFETIME",
    "PanelSession",
    "PanelSessions",
    "owner_from_request",
]

SESSION_COOKIE = "oh_panel"
LOGIN_COOKIE = "oh_panel_login"
SESSION_LIFETIME = timedelta(hours=12)
MAX_COOKIE = 1024
# Methods that change nothing: the only ones for which a cookie alone may authenticate.
SAFE_METHODS = frozenset(("GET", "HEAD"))


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def masked(token: str) -> str:
    """``token`` under a fresh one-time pad, so that it is different in every page: a page sent
    compressed with a secret in it and text a caller chose (a search) would otherwise let
    whoever sees its size guess the secret a byte at a time (BREACH)."""
    raw = token.encode("ascii")
    pad = secrets.token_bytes(len(raw))
    return _b64(pad + bytes(a ^ b for a, b in zip(pad, raw, strict=True)))


def unmasked(text: str | None) -> str:
    """The token ``masked`` hid ("" for anything that is not a masked token)."""
    if not text or len(text) > MAX_COOKIE or not text.isascii():
        return ""
    try:
        data = _unb64(text)
    except ValueError:
        return ""
    half = len(data) // 2
    if len(data) != 2 * half:
        return ""
    raw = bytes(a ^ b for a, b in zip(data[:half], data[half:], strict=True))
    return raw.decode("ascii") if raw.isascii() else ""


@dataclass(frozen=True, slots=True)
class PanelSession:
    owner: str
    nonce: str
    expires: int  # seconds since the epoch


class PanelSessions:
    """Issues and checks session values and CSRF tokens with one host secret."""

    def __init__(self, secret: bytes, lifetime: timedelta = SESSION_LIFETIME) -> None:
        self._secret = secret
        self.lifetime = lifetime

    def _mac(self, purpose: str, value: str) -> str:
        message = f"oh-panel/{purpose}\0{value}".encode()
        return hmac.new(self._secret, message, hashlib.sha256).hexdigest()

    # -- sessions ---------------------------------------------------------------------------

    def issue(self, owner: str, now: datetime) -> str:
        """A new session value for ``owner`` (already authenticated), valid for the lifetime."""
        body = {
            "o": owner,
            "n": secrets.token_urlsafe(16),
            "e": int((now + self.lifetime).timestamp()),
        }
        payload = _b64(json.dumps(body, separators=(",", ":")).encode("utf-8"))
        return f"{payload}.{self._mac('session', payload)}"

    def resolve(self, value: str | None, now: datetime) -> PanelSession | None:
        """The session a cookie value holds, or None if it is missing, forged or expired."""
        if not value or len(value) > MAX_COOKIE or value.count(".") != 1:
            return None
        payload, mac = value.split(".")
        if not hmac.compare_digest(mac, self._mac("session", payload)):
            return None
        try:
            body: Any = json.loads(_unb64(payload))
        except ValueError:
            return None
        if not isinstance(body, dict):
            return None
        owner, nonce, expires = body.get("o"), body.get("n"), body.get("e")
        if type(owner) is not str or type(nonce) is not str or type(expires) is not int:
            return None
        if now.timestamp() >= expires:
            return None
        return PanelSession(owner, nonce, expires)

    # -- CSRF -------------------------------------------------------------------------------

    def csrf(self, session: PanelSession) -> str:
        """The session's CSRF token as a page carries it: masked afresh for every page."""
        return masked(self._mac("csrf", session.nonce))

    def check_csrf(self, session: PanelSession, submitted: str | None) -> bool:
        return hmac.compare_digest(unmasked(submitted), self._mac("csrf", session.nonce))

    def login_nonce(self) -> str:
        return secrets.token_urlsafe(16)

    def login_csrf(self, nonce: str) -> str:
        """The sign-in form's CSRF token, masked afresh for every page as ``csrf`` is."""
        return masked(self._mac("login", nonce))

    def check_login_csrf(self, nonce: str | None, submitted: str | None) -> bool:
        if not nonce or len(nonce) > MAX_COOKIE:
            return False
        return hmac.compare_digest(unmasked(submitted), self._mac("login", nonce))


def owner_from_request(host: Host, request: Request) -> str:
    """The owner a request authenticates: the bearer header if there is one, else the panel's
    session cookie; ``unauthenticated`` otherwise.

    A bearer header, when present, decides alone (a wrong token is not rescued by a cookie).
    The cookie counts only for GET and HEAD: a cookie is sent by the browser on its own, so
    routes that change something must require a bearer token or the panel's CSRF-checked forms.
    """
    token = bearer_token(request.headers)
    if token is not None:
        return host.owner(token)
    if request.method in SAFE_METHODS:
        session = PanelSessions(host.secret).resolve(
            request.cookies.get(SESSION_COOKIE), host.clock()
        )
        if session is not None:
            return session.owner
    raise Unauthenticated("an owner token or a panel session is required")
