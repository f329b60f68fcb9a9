"""What a tool is: the one declaration every transport, document and client is built from.

A ``Tool`` names everything about one tool: its typed arguments and how they are read
(``parse``), its published argument and result schemas, what the agent is told
(``description``), how the tool runs (``run``, over the shared ``Service``), whether it
only reads and may run on the event loop, what it counts in the metrics and which memory card
it makes, and the examples of the HTTP reference. ``oh.tools.registry`` lists the tools; HTTP,
MCP, the OpenAPI document, ``oh schemas`` and the host read that list, and tests hold
docs/tools.md and ``oh.client`` to it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, NamedTuple, Protocol, TypeVar

from oh.core.notebook import Notebook

if TYPE_CHECKING:
    from datetime import datetime

    from oh.core.answers import Answer
    from oh.core.changes import Change
    from oh.core.clock import Clock
    from oh.services.query import TokenSigner
    from oh.services.view import Views
    from oh.storage.base import KnowledgeSource, MemoryStore

__all__ = ["Caller", "Example", "RecallService", "Service", "Tool"]

A = TypeVar("A")


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling which notebook, as the host authenticated it."""

    notebook_id: str
    principal: str  # the agent credential's identity; tokens are bound to it
    author: str  # stamped on every write, e.g. ``agent:<run>``
    # The notebook as the host read it to authenticate this very call, so the tool need not
    # read it again; None makes the tool read it. A caller therefore lives for one call.
    notebook: Notebook | None = None


class RecallService(Protocol):
    def recall(self, notebook: Notebook, text: str, limit: int) -> dict[str, Any]:
        """``{"rows": [{"name", "digest", "origin", "score"}], "pending": int}``."""
        ...


class Service(Protocol):
    """What a tool runs over: the state every tool shares (``oh.tools.service.Tools`` is it).
    A tool module sees only this, so the registry, the tools and the service that dispatches to
    them import one another in one direction."""

    memory: MemoryStore
    knowledge: KnowledgeSource | None
    signer: TokenSigner
    clock: Clock
    views: Views
    recall_service: RecallService | None
    shadow: bool
    on_recall_shadow: Callable[[Caller, dict[str, Any]], None] | None

    def open_notebook(self, caller: Caller) -> Notebook:
        """The caller's notebook, refused unless it may be written to now."""
        ...

    def profiled(self, caller: Caller, changes: tuple[Change, ...]) -> tuple[Change, ...]:
        """The changes with their kinds' profiles applied (docs/packs.md)."""
        ...

    def answer(
        self,
        caller: Caller,
        notebook: Notebook,
        question: str,
        params: dict[str, Any],
        now: datetime,
    ) -> Answer:
        """The answer at the notebook's current version, computed or reused, and kept."""
        ...

    def kept_answer(self, notebook_id: str, answer_id: str, offset: int, limit: int) -> Answer:
        """A kept answer's page; ``token_expired`` if it is gone."""
        ...


class Example(NamedTuple):
    """One example of a request body or a result, for the HTTP reference. ``key`` names it
    among several; a tool with one example of a body leaves it empty."""

    key: str
    summary: str
    value: Any


def _ok(result: dict[str, Any]) -> str:
    return "ok"


def _no_card(result: dict[str, Any]) -> tuple[str, tuple[str, ...]] | None:
    return None


@dataclass(frozen=True, slots=True)
class Tool(Generic[A]):
    """One tool, declared once."""

    name: str
    # What the agent is told about the tool (the MCP tool list, the HTTP reference).
    description: str
    # The published JSON Schemas (draft 2020-12) of the arguments and of the result.
    arguments: dict[str, Any]
    result: dict[str, Any]
    # The arguments as the agent sent them -> the typed value, or a typed error.
    parse: Callable[[Any], A]
    # The typed arguments -> the result; every failure raises (an ``OhError`` unless a bug).
    run: Callable[[Service, Caller, A], dict[str, Any]]
    requests: tuple[Example, ...]
    results: tuple[Example, ...]
    # Changes nothing stored: sending it again answers the same (clients retry it freely).
    read_only: bool = True
    # Reads briefly: a transport over an embedded database may run it on its event loop, where
    # the hop to a thread and back would cost several times the call.
    inline: bool = False
    # For a tool that writes (MCP's annotations): whether it may remove data, and whether a
    # retry of the same call changes nothing more.
    destructive: bool = False
    idempotent: bool = False
    # Offered only by a host with recall enabled (elsewhere its route answers not_found).
    needs_recall: bool = False
    # The outcome a call is counted under in the metrics, from its result.
    outcome: Callable[[dict[str, Any]], str] = _ok
    # The memory card a result makes, as (kind, names), or None.
    card: Callable[[dict[str, Any]], tuple[str, tuple[str, ...]] | None] = _no_card

    @property
    def title(self) -> str:
        return self.name.title()
