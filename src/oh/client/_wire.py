"""What the sync and async clients share: each route as a ``Call`` (method, path, body, and
whether it may be sent again), reading an answer into a result or a typed error, the retry
policy, and the reader of server-sent events. Nothing here does I/O.

A ``Call`` is built once, its body encoded once, so a retry sends the very same bytes: a
``remember`` keeps its request id across every attempt, which is what makes retrying it safe.
"""

from __future__ import annotations

import json
import random
import re
import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

from oh._version import __version__
from oh.core.canonical import input_value
from oh.errors import InvalidArgument, OhError, StorageUnavailable, error_for_code

__all__ = [
    "DEFAULT_TIMEOUT",
    "EVENTS_READ_TIMEOUT",
    "MAX_BODY_BYTES",
    "READ_ONLY_TOOLS",
    "Call",
    "EventReader",
    "Retry",
    "answer",
    "base_url",
    "failed",
    "given",
    "headers",
    "memory_card",
    "refusal",
    "token",
    "transient",
    "with_read_timeout",
]

DEFAULT_TIMEOUT = 10.0
# The server sends a keep-alive comment every 15 s: three missed ones mean the stream is gone.
EVENTS_READ_TIMEOUT = 45.0
# The server refuses a larger body before reading it, and may close the connection while the
# body is still being sent; refusing it here gives the same error without the broken pipe.
MAX_BODY_BYTES = 1_048_576
# Tools that change nothing stored: sending one again answers the same.
READ_ONLY_TOOLS = frozenset({"query", "read", "explain", "recall"})
_TOKEN = re.compile(r"[\x21-\x7e]+")
_USER_AGENT = f"oh-client/{__version__}"


@dataclass(frozen=True, slots=True)
class Retry:
    """How often a call is tried and how long the client waits between tries.

    ``attempts`` counts every try, the first included (1: never retry). Before try *n + 1* the
    client waits ``backoff * 2**(n - 1)`` seconds, at most ``max_backoff``, scaled by a random
    factor between 0.5 and 1 so that many clients do not retry in step. Only what is safe to
    send again is retried (docs/client.md)."""

    attempts: int = 3
    backoff: float = 0.2
    max_backoff: float = 2.0

    def __post_init__(self) -> None:
        if type(self.attempts) is not int or self.attempts < 1:
            raise InvalidArgument("Retry.attempts is an integer of at least 1")
        if not (0 <= self.backoff <= self.max_backoff):
            raise InvalidArgument("Retry needs 0 <= backoff <= max_backoff")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after the failed try number ``attempt`` (1 for the first)."""
        return min(self.max_backoff, self.backoff * 2.0 ** (attempt - 1)) * random.uniform(0.5, 1)


@dataclass(frozen=True, slots=True)
class Call:
    """One request as it goes on the wire. ``safe``: sending it again after its answer was
    lost cannot change anything twice (a read, an idempotent write, a ``remember`` with its
    request id). ``text``: the answer is text (``/metrics``), not JSON."""

    method: str
    path: str
    params: Mapping[str, str] | None = None
    body: bytes | None = None
    safe: bool = False
    text: bool = False


def base_url(value: Any) -> str:
    """The server's URL without a trailing slash; an http(s) URL with a host, or
    ``invalid_argument``."""
    if not isinstance(value, str | httpx.URL):
        raise InvalidArgument("base_url is the server's URL, e.g. http://127.0.0.1:8765")
    try:
        url = httpx.URL(str(value))
    except (httpx.InvalidURL, ValueError, TypeError):
        raise InvalidArgument(f"base_url {str(value)[:200]!r} is not a URL") from None
    if url.scheme not in ("http", "https") or not url.host or url.query or url.fragment:
        raise InvalidArgument(f"base_url {str(value)[:200]!r} is not an http(s) URL of a server")
    return str(url).rstrip("/")


def token(value: Any) -> str | None:
    """A bearer token as it can travel in a header: printable ASCII, no spaces."""
    if value is None:
        return None
    if not isinstance(value, str) or not _TOKEN.fullmatch(value):
        raise InvalidArgument("a token is printable ASCII without spaces (oho_... or oha_...)")
    return value


def with_read_timeout(timeout: httpx.Timeout, read: float) -> httpx.Timeout:
    return httpx.Timeout(connect=timeout.connect, read=read, write=timeout.write, pool=timeout.pool)


def headers(bearer: str | None, call: Call, *, accept: str = "application/json") -> dict[str, str]:
    out = {"Accept": accept, "User-Agent": _USER_AGENT}
    if bearer is not None:
        out["Authorization"] = f"Bearer {bearer}"
    if call.body is not None:
        out["Content-Type"] = "application/json"
    return out


# -- building calls ---------------------------------------------------------------------------


def _segment(value: Any, what: str) -> str:
    """``value`` as one path segment. A "/" would route elsewhere, and a segment "." or ".."
    would be folded into the path by URL normalization (``records/..`` is the notebook itself),
    so those are refused or escaped here."""
    if not isinstance(value, str) or not value or "/" in value:
        raise InvalidArgument(f"{what} holds no / and is not empty")
    encoded = quote(value, safe="")
    return encoded.replace(".", "%2E") if encoded in (".", "..") else encoded


def _param(value: Any, what: str, *, number: bool = False) -> str:
    if number:
        if type(value) is not int:
            raise InvalidArgument(f"{what} is an integer")
        return str(value)
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} is text")
    return value


def _params(**values: tuple[Any, bool]) -> dict[str, str]:
    return {
        key: _param(value, key, number=number)
        for key, (value, number) in values.items()
        if value is not None
    }


def encode(value: Any, where: str) -> bytes:
    """``value`` as a JSON body, read by the rule every transport reads values by (``5.0`` is 5;
    NaN, Infinity, integers past ±(2^53-1), lone surrogates, non-string keys and anything JSON
    cannot carry are ``invalid_argument``), and within the server's size limit."""
    read = input_value(value, where)
    try:
        text = json.dumps(read, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidArgument(f"{where} is not a JSON value ({exc})") from None
    raw = text.encode("utf-8")
    if len(raw) > MAX_BODY_BYTES:
        raise InvalidArgument(f"request body over {MAX_BODY_BYTES} bytes", limit=MAX_BODY_BYTES)
    return raw


def given(**values: Any) -> dict[str, Any]:
    return {key: value for key, value in values.items() if value is not None}


def put_document(document: str) -> Call:
    return Call("PUT", f"/v1/documents/{_segment(document, 'document')}", safe=True)


def delete_document(document: str) -> Call:
    return Call("DELETE", f"/v1/documents/{_segment(document, 'document')}")


def open_notebook(document: str, run: str, pin: int | str | None, run_kind: str | None) -> Call:
    body = encode({"run": run, **given(pin=pin, run_kind=run_kind)}, "open body")
    path = f"/v1/documents/{_segment(document, 'document')}/notebooks"
    return Call("POST", path, body=body, safe=True)


def list_notebooks(
    document: str | None, state: str | None, limit: int | None, cursor: str | None
) -> Call:
    params = _params(
        document=(document, False),
        state=(state, False),
        limit=(limit, True),
        cursor=(cursor, False),
    )
    return Call("GET", "/v1/notebooks", params=params, safe=True)


def _notebook(notebook: str) -> str:
    return f"/v1/notebooks/{_segment(notebook, 'notebook')}"


def get_notebook(notebook: str) -> Call:
    return Call("GET", _notebook(notebook), safe=True)


def forget_notebook(notebook: str) -> Call:
    return Call("DELETE", _notebook(notebook))


def forget_note(notebook: str, name: str) -> Call:
    return Call("DELETE", f"{_notebook(notebook)}/records/{_segment(name, 'name')}")


def records(notebook: str) -> Call:
    return Call("GET", f"{_notebook(notebook)}/records", safe=True)


def events(notebook: str) -> Call:
    return Call("GET", f"{_notebook(notebook)}/events", safe=True)


def bootstrap(notebook: str) -> Call:
    return Call("GET", f"{_notebook(notebook)}/bootstrap", safe=True)


def new_request_id() -> str:
    """A request id no other call will use: 128 random bits."""
    return f"oh-client-{secrets.token_hex(16)}"


def tool(notebook: str, name: str, arguments: Any) -> Call:
    """One tool call. A ``remember`` that names no request id gets a fresh one here, once, so
    every retry of this call carries the same id."""
    if name == "remember" and isinstance(arguments, Mapping) and "request_id" not in arguments:
        arguments = {**arguments, "request_id": new_request_id()}
    safe = name in READ_ONLY_TOOLS or (
        name == "remember" and isinstance(arguments, Mapping) and "request_id" in arguments
    )
    body = encode(arguments, f"{name} arguments" if isinstance(name, str) else "arguments")
    path = f"{_notebook(notebook)}/tools/{_segment(name, 'tool')}"
    return Call("POST", path, body=body, safe=safe)


def remember(
    notebook: str, changes: Sequence[Mapping[str, Any]], based_on: int, request_id: str | None
) -> Call:
    arguments = {"based_on": based_on, "changes": changes, **given(request_id=request_id)}
    return tool(notebook, "remember", arguments)


def knowledge(revision: int | None) -> Call:
    return Call("GET", "/v1/knowledge", params=_params(revision=(revision, True)), safe=True)


def propose(body: dict[str, Any]) -> Call:
    # Not resent: the same proposal sent again answers created: false, hiding that it was new.
    return Call("POST", "/v1/knowledge/proposals", body=encode(body, "proposal body"))


def decide(proposal_id: str, body: dict[str, Any]) -> Call:
    path = f"/v1/knowledge/proposals/{_segment(proposal_id, 'proposal_id')}/decision"
    return Call("POST", path, body=encode(body, "decision body"))


HEALTHZ = Call("GET", "/healthz", safe=True)
METRICS = Call("GET", "/metrics", safe=True, text=True)
OPENAPI = Call("GET", "/openapi.json", safe=True)


# -- reading answers --------------------------------------------------------------------------


def _oh_error(value: Any) -> OhError | None:
    """The typed error of Oh's error body ``{"error": {"code", "message", ...}}``, else None."""
    if type(value) is not dict or set(value) != {"error"}:
        return None
    body = value["error"]
    if type(body) is not dict:
        return None
    code, message = body.get("code"), body.get("message")
    if not isinstance(code, str) or not isinstance(message, str):
        return None
    details = {k: v for k, v in body.items() if k not in ("code", "message")}
    return error_for_code(code, message, **details)


def _json(content: bytes) -> Any:
    try:
        return json.loads(content)
    except (ValueError, RecursionError):
        return None


def _not_oh(status: int, why: str) -> StorageUnavailable:
    return StorageUnavailable(f"the server answered HTTP {status} {why}", status=status)


def answer(call: Call, status: int, content: bytes) -> Any:
    """The result of ``call`` from its answer, or the typed error it carries. An answer that is
    not Oh's (a proxy's page, a truncated body) is ``storage_unavailable`` with its ``status``."""
    if 200 <= status < 300:
        if call.text:
            try:
                return content.decode("utf-8")
            except UnicodeDecodeError:
                raise _not_oh(status, "with text that is not UTF-8") from None
        value = _json(content)
        error = _oh_error(value)
        if error is not None:
            raise error
        if type(value) is not dict:
            raise _not_oh(status, "with a body that is not a JSON object")
        return value
    raise refusal(status, content)


def refusal(status: int, content: bytes) -> OhError:
    """The typed error an answer that is not a success carries."""
    return _oh_error(_json(content)) or _not_oh(status, "without Oh's error body")


def transient(call: Call, error: OhError) -> bool:
    """Whether ``call`` may be tried again after ``error``: only a safe call, and only after
    ``storage_unavailable`` from Oh, or a 5xx, 429 or unreadable success from something else."""
    if not call.safe or not isinstance(error, StorageUnavailable):
        return False
    status = error.details.get("status")
    return not isinstance(status, int) or status >= 500 or status == 429 or status < 300


# The request surely never reached the server: any call may be tried again.
_UNSENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)


def failed(call: Call, url: str, exc: httpx.RequestError) -> tuple[OhError, bool]:
    """The typed error for a request that got no answer, and whether to try it again."""
    if isinstance(exc, httpx.TimeoutException):
        why = f"no answer in time ({type(exc).__name__})"
    else:
        why = str(exc) or type(exc).__name__
    error = StorageUnavailable(f"{call.method} {url}: {why}")
    again = isinstance(exc, _UNSENT) or (call.safe and isinstance(exc, httpx.TransportError))
    return error, again


# -- server-sent events -----------------------------------------------------------------------


class EventReader:
    """Server-sent events, line by line: ``line`` answers ``(event, data)`` when a blank line
    ends an event, and None otherwise (comments and keep-alives included)."""

    def __init__(self) -> None:
        self._event = ""
        self._data: list[str] = []

    def line(self, line: str) -> tuple[str, str] | None:
        if not line:
            event, data = self._event or "message", self._data
            self._event, self._data = "", []
            return (event, "\n".join(data)) if data else None
        if line.startswith(":"):
            return None
        field, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if field == "event":
            self._event = value
        elif field == "data":
            self._data.append(value)
        return None


def memory_card(event: str, data: str) -> Any:
    """The memory card an event carries; None for an event of another kind."""
    if event != "memory-card":
        return None
    value = _json(data.encode("utf-8"))
    if type(value) is not dict:
        raise StorageUnavailable("the event stream sent a memory card that is not a JSON object")
    return value
