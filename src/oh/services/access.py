"""Who may call: the host's principals and credentials, and which owner holds each document.

The host owns users and documents; Oh only needs to know, on every call, which owner a request
speaks for and whether that owner still holds the document a notebook belongs to.

* **Owner tokens** (``oh token create``) are random; only their sha256 is stored, so a copy of
  the registry grants nothing.
* **Agent credentials** are issued when a notebook opens: an HMAC under the host's secret over
  the notebook id, so they keep naming exactly that notebook after a forget or purge (every call
  then answers ``purged``) and need no storage at all.
* **Documents** are registered to one owner; another owner is refused (``forbidden``).

``Host`` composes these two with the stores; transports never use them directly.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Mapping

from oh.core.clock import Clock, utc_text
from oh.core.identifiers import check_document_name, check_identifier
from oh.errors import Forbidden, NotFound, Unauthenticated
from oh.storage.base import HostRegistry

__all__ = [
    "AGENT_TOKEN_ENV",
    "AGENT_TOKEN_PREFIX",
    "NO_DOCUMENT",
    "OWNER_TOKEN_PREFIX",
    "Credentials",
    "Documents",
    "bearer_token",
]

OWNER_TOKEN_PREFIX = "oho_"  # noqa: S105 - a prefix, not a secret
AGENT_TOKEN_PREFIX = "oha_"  # noqa: S105 - a prefix, not a secret
# Where ``oh mcp`` reads the agent token from (never its command line, which others can see).
AGENT_TOKEN_ENV = "OH_AGENT_TOKEN"  # noqa: S105 - the variable's name, not a secret
_MAX_OWNER_TOKEN = 200


def bearer_token(headers: Mapping[str, str]) -> str | None:
    """The credential of an ``Authorization: Bearer <token>`` header (the scheme in any case,
    the token stripped); None when the header is missing, names another scheme or carries no
    token. HTTP, MCP over HTTP and the panel all read the header with this."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    token = token.strip()
    return token if token and scheme.lower() == "bearer" else None


def _token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class Credentials:
    """Owner tokens and agent credentials: issued here, and checked here on every call."""

    def __init__(
        self, registry: HostRegistry, secret: bytes, clock: Clock, owner_token_command: str
    ) -> None:
        self._registry = registry
        self._secret = secret
        self._clock = clock
        self._owner_token_command = owner_token_command

    def create_owner_token(self, owner: str) -> str:
        check_identifier(owner, "owner")
        token = OWNER_TOKEN_PREFIX + secrets.token_urlsafe(32)
        self._registry.add_owner_token(_token_hash(token), owner, utc_text(self._clock()))
        return token

    def owner(self, token: str | None) -> str:
        """The owner a bearer token authenticates; ``unauthenticated`` otherwise."""
        if not token or not token.startswith(OWNER_TOKEN_PREFIX) or len(token) > _MAX_OWNER_TOKEN:
            raise Unauthenticated(f"an owner token is required ({self._owner_token_command})")
        owner = self._registry.owner_of_token(_token_hash(token))
        if owner is None:
            raise Unauthenticated("unknown owner token")
        return owner

    def _agent_mac(self, notebook_id: str) -> str:
        return hmac.new(self._secret, b"agent:" + notebook_id.encode(), hashlib.sha256).hexdigest()

    def agent_token(self, notebook_id: str) -> str:
        return f"{AGENT_TOKEN_PREFIX}{notebook_id}.{self._agent_mac(notebook_id)}"

    def agent(self, token: str | None) -> str:
        """The notebook an agent credential names; ``unauthenticated`` otherwise, with a
        message that says what was wrong with the credential (none, an owner's, not shaped like
        an agent token, not issued here) and never whether any notebook exists."""
        if not token:
            raise Unauthenticated(
                "no agent token: send the notebook's agent token as 'Authorization: Bearer"
                f" {AGENT_TOKEN_PREFIX}…' (oh notebook open prints it; over stdio, set"
                f" {AGENT_TOKEN_ENV})"
            )
        if token.startswith(OWNER_TOKEN_PREFIX):
            raise Unauthenticated(
                "an owner token cannot call an agent's tools: use the notebook's agent token"
                f" ({AGENT_TOKEN_PREFIX}…, printed by oh notebook open)"
            )
        if not token.isascii() or not token.startswith(AGENT_TOKEN_PREFIX) or token.count(".") != 1:
            raise Unauthenticated(
                f"malformed agent token: an agent token is {AGENT_TOKEN_PREFIX}<notebook id>.<64"
                " hex digits>, as oh notebook open prints it"
            )
        notebook_id, mac = token[len(AGENT_TOKEN_PREFIX) :].split(".")
        if not hmac.compare_digest(mac, self._agent_mac(notebook_id)):
            raise Unauthenticated(
                "not an agent token issued by this host (from another host, or altered): use"
                " the one oh notebook open printed for this notebook"
            )
        return notebook_id


# A document that is not registered (or is another owner's, which the answer does not tell).
NO_DOCUMENT = (
    "no document {document}: register it first (oh document put --owner OWNER {document},"
    " or PUT /v1/documents/{document})"
)


class Documents:
    """Which owner holds each document, as the host's registry records it."""

    def __init__(self, registry: HostRegistry, clock: Clock) -> None:
        self._registry = registry
        self._clock = clock

    def owner_of(self, document: str) -> str | None:
        return self._registry.document_owner(document)

    def register(self, owner: str, document: str) -> bool:
        """Register ``document`` for ``owner``; True if new. ``forbidden`` if another owns it."""
        check_identifier(owner, "owner")
        check_document_name(document)
        existing = self._registry.document_owner(document)
        holder = self._registry.register_document(document, owner, utc_text(self._clock()))
        if holder != owner:
            raise Forbidden(f"document {document} belongs to another owner")
        return existing is None

    def check_owned(self, owner: str, document: str) -> None:
        """``not_found`` for no such document, ``forbidden`` for another owner's."""
        check_identifier(document, "document")
        holder = self._registry.document_owner(document)
        if holder is None:
            raise NotFound(NO_DOCUMENT.format(document=document))
        if holder != owner:
            raise Forbidden(f"document {document} belongs to another owner")

    def remove(self, owner: str, document: str) -> None:
        """Remove the owner's document from the registry; its notebooks are the host's to forget."""
        self.check_owned(owner, document)
        self._registry.remove_document(document)
