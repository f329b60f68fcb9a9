"""Answers to the agent's questions (docs/tools.md) as values: rows, and why each came back.

An answer is kept server-side until it expires, so later pages and ``explain`` see exactly the
answer the agent got, computed at one memory version and one pinned revision. A row keeps the
rule's evidence (``path``); the human reason is derived from it when ``explain`` asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from oh.core.canonical import canonical_text, sha256_hex

__all__ = ["Answer", "AnswerRow", "answer_id", "decode_rows", "encode_rows"]


def answer_id(
    notebook_id: str,
    version: int,
    revision: int | None,
    question: str,
    params: dict[str, Any],
    caller: str,
) -> str:
    """The id of an answer: a digest of everything it depends on (notebook, memory version,
    pinned revision, question, parameters, caller). Asking the same question again before
    memory moves on names the same answer; ``verify`` recomputes the id of every kept answer
    and then its rows."""
    identity = {
        "n": notebook_id,
        "v": version,
        "r": revision,
        "q": question,
        "p": params,
        "c": caller,
    }
    return "an_" + sha256_hex(canonical_text(identity))[:32]


class AnswerRow(NamedTuple):
    """One row of an answer. A tuple, so an answer of thousands of rows is cheap to build and
    serializes to compact JSON as it is."""

    origin: str
    kind: str
    name: str
    digest: str | None
    path: tuple[str, ...] = ()  # the link path (graph questions) or the change (changes_since)
    conflicts_with: tuple[str, ...] = ()
    removed: bool = False

    def to_json(self, row: int) -> dict[str, Any]:
        body: dict[str, Any] = {
            "row": row,
            "origin": self.origin,
            "kind": self.kind,
            "name": self.name,
            "digest": self.digest,
        }
        if self.conflicts_with:
            body["conflicts_with"] = list(self.conflicts_with)
        if self.removed:
            body["removed"] = True
        return body

    @classmethod
    def from_stored(cls, value: list[Any]) -> AnswerRow:
        origin, kind, name, digest, path, conflicts, removed = value
        return cls(origin, kind, name, digest, tuple(path), tuple(conflicts), bool(removed))


@dataclass(frozen=True, slots=True)
class Answer:
    """A computed answer. ``rows`` holds rows ``offset`` … ``offset + len(rows) - 1`` of
    ``total``: the whole answer when it is saved, a page of it when it is read back."""

    answer_id: str
    notebook_id: str
    caller: str
    question: str
    params: dict[str, Any]
    version: int
    revision: int | None
    created_at: str
    expires_at: str
    rows: tuple[AnswerRow, ...]
    total: int
    offset: int = 0


# Rows are kept as text, one line per row and tab-separated fields: names, kinds, digests and
# link words never contain tabs, newlines or the unit separator, so nothing needs escaping.
_ORIGIN = {"note": "n", "reviewed": "r"}
_ORIGIN_BACK = {"n": "note", "r": "reviewed"}


def encode_rows(rows: tuple[AnswerRow, ...]) -> str:
    return "\n".join(
        [
            "\t".join(
                (
                    _ORIGIN[row.origin],
                    row.kind,
                    row.name,
                    row.digest or "",
                    "\x1f".join(row.path),
                    ",".join(row.conflicts_with),
                    "1" if row.removed else "",
                )
            )
            for row in rows
        ]
    )


def decode_rows(text: str, offset: int = 0, limit: int | None = None) -> tuple[AnswerRow, ...]:
    if not text:
        return ()
    lines = text.split("\n")
    stop = None if limit is None else offset + limit
    decoded = []
    for line in lines[offset:stop]:
        origin, kind, name, digest, path, conflicts, removed = line.split("\t")
        decoded.append(
            AnswerRow(
                _ORIGIN_BACK[origin],
                kind,
                name,
                digest or None,
                tuple(path.split("\x1f")) if path else (),
                tuple(conflicts.split(",")) if conflicts else (),
                removed == "1",
            )
        )
    return tuple(decoded)
