"""How Sponge embeds Oh: its agents' working memory, behind Sponge's own access rules.

Sponge runs Oh as a library inside its own server, with no ``oh serve``. Oh owns memory: the
notebooks, their logs, reviewed knowledge. Sponge owns everything else, and keeps five duties
Oh cannot keep for it (docs/embedding.md):

* it authenticates its users; Oh is only told a user id, as the notebook's owner;
* on every tool call it rechecks that the user still owns the document (``AgentRun.call``);
* it stamps the author and the time: ``Caller.author``, and the clock given to Oh's services;
* it opens one notebook per run before the agent gets its tools (``AgentMemory.start_run``);
* it purges expired notebooks on a schedule: ``oh purge --data DIR --every 5m``, as its own
  process, with the purge credential.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from library import Library

from oh import (
    Caller,
    ForgetReport,
    Knowledge,
    MemoryStore,
    Notebook,
    Notebooks,
    Proposal,
    ReviewedRecord,
    StoredRecord,
    Tools,
    VerifyReport,
    verify_knowledge,
    verify_store,
)
from oh.config import Locations, open_knowledge_store, open_memory_store, start_master_key
from oh.errors import Forbidden, NotFound, OhError
from oh.profiles import Profiles
from oh.tools.schemas import ARGUMENTS

__all__ = ["AGENT_TOOLS", "AgentMemory", "AgentRun", "check_owner"]

# The four tools Sponge offers; Oh's fifth, recall, is left out here.
AGENT_TOOLS = ("remember", "query", "read", "explain")
DESCRIPTIONS = {
    "remember": "Write working notes, all or nothing, based on the memory version you last read.",
    "query": "Ask one question from Oh's fixed menu; rows carry names and digests, never text.",
    "read": "Read one note, or one record of reviewed knowledge, which you cannot change.",
    "explain": "Say why a row of a query answer came back, with that answer's token.",
}


def check_owner(library: Library, user: str, document: str) -> None:
    """Sponge's access rule: only a document's owner reaches its working memory."""
    owner = library.owner_of(document)
    if owner is None:
        raise NotFound(f"no document {document}")
    if owner != user:
        raise Forbidden(f"{user} does not own {document}")


class AgentMemory:
    """Oh's stores and services on one data directory, used only through Sponge's checks."""

    def __init__(
        self,
        data_dir: Path,
        library: Library,
        *,
        clock: Callable[[], datetime],
        lifetime: timedelta = timedelta(hours=24),
    ) -> None:
        self.library = library
        # The same two files `oh serve` would use, so `oh verify --data DIR` checks them, and
        # the same keys beside them in DIR-keys: notes sealed, knowledge MACed (docs/keys.md).
        locations = Locations(data_dir)
        locations.prepare()
        start_master_key(locations)  # makes DIR-keys/master.key once, if no key is configured
        self._memory = open_memory_store(locations)
        self._knowledge = open_knowledge_store(locations)
        # Every service gets Sponge's clock: it stamps each write and decides expiry.
        profiles = Profiles(self._knowledge, clock=clock)
        self._notebooks = Notebooks(
            self._memory, clock=clock, lifetime=lifetime, knowledge=self._knowledge
        )
        self._review = Knowledge(self._knowledge, self._memory, clock=clock, profiles=profiles)
        self._tools = Tools(
            self._memory, self._knowledge, library.secret(), clock=clock, profiles=profiles
        )

    def close(self) -> None:
        self._memory.close()
        self._knowledge.close()

    # -- the agent's side ---------------------------------------------------------------------

    def start_run(self, user: str, document: str, run: str) -> AgentRun:
        """Open the run's own notebook, pinned at the user's latest reviewed knowledge."""
        check_owner(self.library, user, document)
        notebook = self._notebooks.open(user, document, run)
        return AgentRun(self.library, self._memory, self._tools, user, notebook)

    # -- the owner's side ---------------------------------------------------------------------

    def notes(self, user: str, notebook_id: str) -> list[StoredRecord]:
        """The run's working notes, with the author and time Sponge stamped on each."""
        self._owned(user, notebook_id)
        return self._memory.records(notebook_id)

    def forget(self, user: str, notebook_id: str) -> ForgetReport:
        """Forget now: the run's notes and log are deleted; its agent's calls answer purged."""
        self._owned(user, notebook_id)
        return self._notebooks.forget(notebook_id, user)

    def propose(self, user: str, notebook_id: str, name: str, source: dict[str, Any]) -> Proposal:
        """Propose one note for review, citing the passage that supports it."""
        self._owned(user, notebook_id)
        return self._review.propose(user, source=source, notebook=notebook_id, name=name)

    def accept(self, user: str, proposal_id: str, reason: str) -> ReviewedRecord:
        """Accept a proposal: it becomes reviewed knowledge at a new revision."""
        decided = self._review.decide(user, proposal_id, decision="accept", reason=reason)
        assert decided.record is not None  # an acceptance always makes a record
        return decided.record

    def verify(self) -> tuple[VerifyReport, VerifyReport]:
        """Replay every log and check every digest, seal and revision, as `oh verify` does:
        ``(memory report, knowledge report)``."""
        notes = verify_store(self._memory, knowledge=self._knowledge)
        return notes, verify_knowledge(self._knowledge)

    def _owned(self, user: str, notebook_id: str) -> Notebook:
        """The notebook, if it is the user's and the user still owns its document; another
        user learns nothing, not even that it exists."""
        try:
            notebook = self._notebooks.get(notebook_id, user)
            check_owner(self.library, user, notebook.document)
        except Forbidden:
            raise NotFound(f"no notebook {notebook_id}") from None
        return notebook


class AgentRun:
    """One agent run, as Sponge hands it to the agent runtime: tool definitions for the model,
    the bootstrap for its first prompt, and ``call`` for every tool call the model makes."""

    def __init__(
        self,
        library: Library,
        memory: MemoryStore,
        tools: Tools,
        user: str,
        notebook: Notebook,
    ) -> None:
        self.user = user
        self.document = notebook.document
        self.run = notebook.run
        self.notebook_id = notebook.id
        self.pinned_revision = notebook.pinned_revision
        self.forgets_at = notebook.forgets_at
        self._library = library
        self._memory = memory
        self._tools = tools

    def definitions(self) -> list[dict[str, Any]]:
        """What the model is told about its tools: Oh's published JSON Schemas, unchanged."""
        return [
            {"name": tool, "description": DESCRIPTIONS[tool], "parameters": ARGUMENTS[tool]}
            for tool in AGENT_TOOLS
        ]

    def bootstrap(self) -> dict[str, Any]:
        """``current_notes`` once, on the agent's behalf: names and digests for its prompt."""
        return self._call("bootstrap", None)

    def call(self, tool: str, arguments: Any) -> dict[str, Any]:
        """One tool call from the model; every failure is an error body the model can read."""
        if tool not in AGENT_TOOLS:
            return NotFound(f"no tool {tool!r}; the tools are {', '.join(AGENT_TOOLS)}").to_json()
        return self._call(tool, arguments)

    def _call(self, tool: str, arguments: Any) -> dict[str, Any]:
        try:
            caller = self._recheck()
        except OhError as error:
            return error.to_json()
        return self._tools.call(caller, tool, arguments)

    def _recheck(self) -> Caller:
        """Who is calling, decided again for this very call: the user must still own the
        document, whatever was true when the run started."""
        notebook = self._memory.notebook(self.notebook_id)
        if self._library.owner_of(notebook.document) != self.user:
            raise Forbidden(f"{self.user} no longer owns {notebook.document}")
        return Caller(
            notebook.id,
            principal=f"agent:{notebook.id}",  # query tokens are bound to it
            author=f"agent:{notebook.run}",  # stamped on every note this call writes
            notebook=notebook,
        )
