"""The question menu (docs/tools.md) and explain tokens.

The agent picks a question from a fixed menu; it can pass a name, a kind or a version, never
query text, rules or filters. Each question is a function over a ``NotebookView`` that returns
rows (origin, kind, name, digest) with the reason each came back, so ``explain`` can say why.

Order is deterministic: by name, then origin (a note before a reviewed record of the same
name); graph questions order by distance, then name, then origin; ``changes_since`` orders by
name.
"""

from __future__ import annotations

import base64
import hashlib
import heapq
import hmac
import json
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

from oh.core.answers import AnswerRow
from oh.core.canonical import canonical_bytes
from oh.core.changes import LogEntry
from oh.errors import NotFound, TokenExpired, TokenInvalid, UnknownQuestion
from oh.services.view import Entry, NotebookView

__all__ = [
    "MAX_DEPTH",
    "QUESTIONS",
    "TokenSigner",
    "ask",
    "check_question",
    "describe",
]

MAX_DEPTH = 8  # how far depends_on / dependents follow links


def _row(view: NotebookView, entry: Entry, path: Iterable[str] = ()) -> AnswerRow:
    return AnswerRow(
        entry.origin,
        entry.kind,
        entry.name,
        entry.digest,
        tuple(path),
        tuple(view.conflicts_of(entry)),
    )


def _ordered(entries: Iterable[Entry]) -> list[Entry]:
    return sorted(entries, key=_order)


def _targets(view: NotebookView, name: str) -> list[Entry]:
    found = [e for e in (view.notes.get(name), view.reviewed.get(name)) if e is not None]
    if not found:
        raise NotFound(
            f"{name} is not in view (no note or reviewed record of that name)", name=name
        )
    return found


def current_notes(view: NotebookView, **_: Any) -> list[AnswerRow]:
    # The hot question: built in one pass over the two name-sorted lists.
    conflicts = view.conflicts
    rows = []
    for entry in heapq.merge(
        (view.notes[name] for name in sorted(view.notes)),
        (view.reviewed[name] for name in sorted(view.reviewed)),
        key=_order,
    ):
        found = conflicts.get((entry.origin, entry.name))
        rows.append(
            AnswerRow(
                entry.origin,
                entry.kind,
                entry.name,
                entry.digest,
                (),
                tuple(found) if found else (),
            )
        )
    return rows


def _order(entry: Entry) -> tuple[str, bool]:
    return entry.name, entry.origin != "note"


def of_kind(view: NotebookView, *, kind: str, **_: Any) -> list[AnswerRow]:
    return [_row(view, e) for e in _ordered(view.entries()) if e.kind == kind]


_LINKS = ("depends_on", "supports", "contradicts")


def related(view: NotebookView, *, name: str, **_: Any) -> list[AnswerRow]:
    targets = _targets(view, name)
    found: dict[tuple[str, str], AnswerRow] = {}
    for entry in view.entries():
        if entry.name == name:
            continue
        for link in _LINKS:
            if name in getattr(entry, link):
                found.setdefault(
                    (entry.origin, entry.name), _row(view, entry, (entry.name, link, name))
                )
    for target in targets:
        for link in _LINKS:
            for other_name in getattr(target, link):
                for other in (view.notes.get(other_name), view.reviewed.get(other_name)):
                    if other is not None and other.name != name:
                        found.setdefault(
                            (other.origin, other.name), _row(view, other, (name, link, other.name))
                        )
    return [found[key] for key in sorted(found, key=lambda k: (k[1], k[0] != "note"))]


def supports(view: NotebookView, *, name: str, **_: Any) -> list[AnswerRow]:
    _targets(view, name)
    return [
        _row(view, e, (e.name, "supports", name))
        for e in _ordered(view.entries())
        if name in e.supports
    ]


def _walk(view: NotebookView, name: str, forward: bool) -> list[AnswerRow]:
    """Breadth-first over depends_on links, cycle-safe and at most ``MAX_DEPTH`` steps."""
    _targets(view, name)
    if forward:

        def step(current: str) -> list[str]:
            out: list[str] = []
            for entry in (view.notes.get(current), view.reviewed.get(current)):
                if entry is not None:
                    out.extend(entry.depends_on)
            return sorted(set(out))
    else:
        dependents: dict[str, set[str]] = {}
        for entry in view.entries():
            for target in entry.depends_on:
                dependents.setdefault(target, set()).add(entry.name)

        def step(current: str) -> list[str]:
            return sorted(dependents.get(current, ()))

    paths: dict[str, list[str]] = {name: [name]}
    frontier = [name]
    order: list[tuple[int, str]] = []
    for depth in range(1, MAX_DEPTH + 1):
        following: list[str] = []
        for current in frontier:
            for nxt in step(current):
                if nxt in paths:
                    continue
                if forward:
                    paths[nxt] = [*paths[current], "depends_on", nxt]
                else:
                    paths[nxt] = [nxt, "depends_on", *paths[current]]
                order.append((depth, nxt))
                following.append(nxt)
        frontier = sorted(following)
        if not frontier:
            break
    rows: list[AnswerRow] = []
    for _depth, found in sorted(order):
        for in_view in (view.notes.get(found), view.reviewed.get(found)):
            if in_view is not None:
                rows.append(_row(view, in_view, paths[found]))
    return rows


def depends_on(view: NotebookView, *, name: str, **_: Any) -> list[AnswerRow]:
    return _walk(view, name, forward=True)


def dependents(view: NotebookView, *, name: str, **_: Any) -> list[AnswerRow]:
    return _walk(view, name, forward=False)


def conflicts(view: NotebookView, **_: Any) -> list[AnswerRow]:
    return [_row(view, e) for e in _ordered(view.entries()) if view.conflicts_of(e)]


def changes_since(
    view: NotebookView, *, since: int, log: Iterable[LogEntry] = (), **_: Any
) -> list[AnswerRow]:
    """Names added, replaced or removed after version ``since`` (only notes change), up to the
    view's version: a write that lands while the answer is computed is not part of it, so the
    answer is exactly what its version implies (``verify`` recomputes it)."""
    touched: dict[str, str] = {}
    for entry in log:
        if since < entry.version <= view.notebook.version:
            for change in entry.changes:
                touched[change.name] = f"{change.op} at version {entry.version}"
    rows = []
    for name in sorted(touched):
        current = view.notes.get(name)
        if current is None:
            rows.append(
                AnswerRow(
                    "note", name.partition(":")[0], name, None, (touched[name],), removed=True
                )
            )
        else:
            rows.append(_row(view, current, (touched[name],)))
    return rows


def describe(
    question: str, params: dict[str, Any], row: AnswerRow, version: int, revision: int | None
) -> str:
    """Why ``row`` came back, in words, from the rule and the evidence the row kept."""
    where = (
        f"note at version {version}"
        if row.origin == "note"
        else f"reviewed record at revision {revision}"
    )
    if question in ("related", "supports", "depends_on", "dependents"):
        depth = (len(row.path) - 1) // 2
        rule = " ".join(row.path)
        extra = f" (depth {depth})" if question in ("depends_on", "dependents") else ""
        return f"{question} {params['name']}: {rule}{extra}; {where}"
    if question == "of_kind":
        return f"of_kind {params['kind']}: {row.name} is a {row.kind} {where}"
    if question == "conflicts":
        return f"conflicts: {row.name} ({where}) conflicts with {', '.join(row.conflicts_with)}"
    if question == "changes_since":
        change = row.path[0] if row.path else "changed"
        return f"changes_since {params['since']}: {row.name} {change}"
    return f"current_notes: {row.name} is a current {where}"


QUESTIONS: dict[str, tuple[tuple[str, ...], Callable[..., list[AnswerRow]]]] = {
    "current_notes": ((), current_notes),
    "related": (("name",), related),
    "supports": (("name",), supports),
    "depends_on": (("name",), depends_on),
    "dependents": (("name",), dependents),
    "conflicts": ((), conflicts),
    "changes_since": (("since",), changes_since),
    "of_kind": (("kind",), of_kind),
}


def check_question(question: str) -> tuple[str, ...]:
    """The parameters a question on the menu needs; ``unknown_question`` listing the menu."""
    if question not in QUESTIONS:
        raise UnknownQuestion(
            f"unknown question {question[:64]!r}; the menu is: {', '.join(QUESTIONS)}",
            menu=list(QUESTIONS),
        )
    return QUESTIONS[question][0]


def ask(
    view: NotebookView, question: str, params: dict[str, Any], log: Iterable[LogEntry] = ()
) -> list[AnswerRow]:
    check_question(question)
    _, answer = QUESTIONS[question]
    return answer(view, log=log, **params)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class TokenSigner:
    """HMAC-SHA256 tokens bound to a notebook, a caller and an answer, with an expiry.

    ``<payload>.<mac>``, both base64url; the payload is canonical JSON. Verification compares
    MACs in constant time before reading the payload.
    """

    def __init__(self, secret: bytes, ttl: timedelta = timedelta(minutes=10)) -> None:
        if len(secret) < 32:
            raise ValueError("the token secret must be at least 32 bytes")
        self._secret = secret
        self.ttl = ttl

    def _mac(self, payload: bytes) -> bytes:
        return hmac.new(self._secret, payload, hashlib.sha256).digest()

    def sign(self, claims: dict[str, Any]) -> str:
        payload = canonical_bytes(claims)
        return f"{_b64(payload)}.{_b64(self._mac(payload))}"

    def verify(
        self, token: Any, *, notebook_id: str, caller: str, now: datetime, kind: str
    ) -> dict[str, Any]:
        """The claims of a genuine, current token for this notebook and caller."""
        if type(token) is not str or token.count(".") != 1 or len(token) > 2048:
            raise TokenInvalid("not a token issued by this host")
        payload_text, mac_text = token.split(".")
        try:
            payload, mac = _unb64(payload_text), _unb64(mac_text)
        except ValueError:
            raise TokenInvalid("not a token issued by this host") from None
        if not hmac.compare_digest(mac, self._mac(payload)):
            raise TokenInvalid("token signature does not match")
        # One token, one spelling: the decoder forgives padding, stray characters and unused
        # bits, so the text must be exactly the canonical encoding of what was signed.
        if _b64(payload) != payload_text or _b64(mac) != mac_text:
            raise TokenInvalid("not a token issued by this host")
        claims: dict[str, Any] = json.loads(payload)
        if claims.get("k") != kind:
            raise TokenInvalid(f"not a {kind} token")
        if claims.get("n") != notebook_id or claims.get("c") != caller:
            raise TokenInvalid("token was issued for another notebook or caller")
        if now.timestamp() >= claims.get("e", 0):
            raise TokenExpired("token has expired; ask the question again")
        return claims
