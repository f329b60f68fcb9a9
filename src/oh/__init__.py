"""Oh: working memory for AI agents, kept strictly apart from reviewed knowledge.

The public surface is re-exported here, each name imported the first time it is used: importing
``oh.client`` (or any one module) loads that module and what it needs, never the storage engine
behind the rest. ``__all__`` is checked by a test.
"""

import importlib as _importlib
import typing as _typing

from oh._version import __version__ as __version__

# What type checkers see; at run time ``__getattr__`` imports each name on first use.
if _typing.TYPE_CHECKING:
    from oh.core.canonical import canonical_bytes as canonical_bytes
    from oh.core.canonical import canonical_text as canonical_text
    from oh.core.canonical import parse_json as parse_json
    from oh.core.canonical import sha256_hex as sha256_hex
    from oh.core.changes import Applied as Applied
    from oh.core.changes import LogEntry as LogEntry
    from oh.core.changes import Refused as Refused
    from oh.core.changes import RememberResult as RememberResult
    from oh.core.changes import parse_changes as parse_changes
    from oh.core.notebook import Notebook as Notebook
    from oh.core.records import Record as Record
    from oh.core.records import StoredRecord as StoredRecord
    from oh.core.reviewed import Decision as Decision
    from oh.core.reviewed import Proposal as Proposal
    from oh.core.reviewed import ReviewedRecord as ReviewedRecord
    from oh.core.reviewed import Source as Source
    from oh.errors import OhError as OhError
    from oh.services.knowledge import Decided as Decided
    from oh.services.knowledge import Knowledge as Knowledge
    from oh.services.notebooks import ForgetReport as ForgetReport
    from oh.services.notebooks import Notebooks as Notebooks
    from oh.services.notebooks import PurgeReport as PurgeReport
    from oh.services.notebooks import purge_expired as purge_expired
    from oh.services.view import NotebookView as NotebookView
    from oh.services.view import view_of as view_of
    from oh.storage.base import KnowledgeSource as KnowledgeSource
    from oh.storage.base import KnowledgeStore as KnowledgeStore
    from oh.storage.base import MemoryStore as MemoryStore
    from oh.storage.base import PurgeAccess as PurgeAccess
    from oh.storage.sqlite.knowledge import SqliteKnowledgeStore as SqliteKnowledgeStore
    from oh.storage.sqlite.notebooks import SqliteMemoryStore as SqliteMemoryStore
    from oh.storage.sqlite.notebooks import SqlitePurgeAccess as SqlitePurgeAccess
    from oh.tools import Caller as Caller
    from oh.tools import Tools as Tools
    from oh.verify import VerifyReport as VerifyReport
    from oh.verify import rebuild as rebuild
    from oh.verify import verify_knowledge as verify_knowledge
    from oh.verify import verify_notebook as verify_notebook
    from oh.verify import verify_store as verify_store

# Where each public name lives (a test keeps it equal to the imports above).
_HOMES: dict[str, tuple[str, ...]] = {
    "oh.core.canonical": ("canonical_bytes", "canonical_text", "parse_json", "sha256_hex"),
    "oh.core.changes": ("Applied", "LogEntry", "Refused", "RememberResult", "parse_changes"),
    "oh.core.notebook": ("Notebook",),
    "oh.core.records": ("Record", "StoredRecord"),
    "oh.core.reviewed": ("Decision", "Proposal", "ReviewedRecord", "Source"),
    "oh.errors": ("OhError",),
    "oh.services.knowledge": ("Decided", "Knowledge"),
    "oh.services.notebooks": ("ForgetReport", "Notebooks", "PurgeReport", "purge_expired"),
    "oh.storage.base": ("KnowledgeSource", "KnowledgeStore", "MemoryStore", "PurgeAccess"),
    "oh.storage.sqlite.notebooks": ("SqliteMemoryStore", "SqlitePurgeAccess"),
    "oh.storage.sqlite.knowledge": ("SqliteKnowledgeStore",),
    "oh.tools": ("Caller", "Tools"),
    "oh.verify": ("VerifyReport", "rebuild", "verify_knowledge", "verify_notebook", "verify_store"),
    "oh.services.view": ("NotebookView", "view_of"),
}
_HOME = {name: module for module, names in _HOMES.items() for name in names}

__all__ = sorted(["__version__", *_HOME])


def __getattr__(name: str) -> _typing.Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'oh' has no attribute {name!r}")
    value = getattr(_importlib.import_module(module), name)
    globals()[name] = value  # later uses skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOME})
