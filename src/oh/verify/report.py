"""What every check of verify shares: the problems it finds and the report of a run, the test
of canonical text, and knowledge read with its MACs unchecked (so a refused row is reported,
not a reason to stop)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oh.core.canonical import canonical_text, load_canonical
from oh.core.records import PLAIN_RECORD
from oh.errors import OhError
from oh.keys.macs import AuthenticatedKnowledge

__all__ = ["Problem", "VerifyReport", "is_canonical", "unchecked"]


@dataclass(frozen=True, slots=True)
class Problem:
    notebook_id: str
    # chain | version | digest | canonical | drift | head | forgotten | damaged
    # | seal (notebook metadata) | vector (recall vectors) | answer (kept answers)
    # | mac (a knowledge row's MAC missing or wrong)
    what: str
    detail: str

    def to_json(self) -> dict[str, str]:
        return {"notebook": self.notebook_id, "what": self.what, "detail": self.detail}


@dataclass(slots=True)
class VerifyReport:
    notebooks: int = 0
    entries: int = 0
    records: int = 0
    problems: list[Problem] = field(default_factory=list)
    # Notebooks whose data key is gone though their rows are here: forgotten after this copy
    # was taken (a restored backup). Not a problem: their rows can never be read, by design.
    forgotten: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "notebooks": self.notebooks,
            "entries": self.entries,
            "records": self.records,
            "problems": [p.to_json() for p in self.problems],
            "forgotten": list(self.forgotten),
        }


def is_canonical(text: str) -> bool:
    """Whether ``text`` is exactly the canonical serialization of the JSON it holds."""
    if PLAIN_RECORD.fullmatch(text) is not None:
        return True
    try:
        return canonical_text(load_canonical(text)) == text
    except (ValueError, OhError):
        return False


def unchecked(knowledge: Any) -> Any:
    """``knowledge`` serving its rows without checking their MACs, so that verify reports a
    refused row instead of stopping at it (``AuthenticatedKnowledge.unchecked``)."""
    return knowledge.unchecked() if isinstance(knowledge, AuthenticatedKnowledge) else knowledge
