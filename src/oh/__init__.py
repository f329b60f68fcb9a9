"""Oh: working memory for AI agents, kept strictly apart from reviewed knowledge.

The public surface is re-exported here; ``__all__`` is checked by a test.
"""

from oh._version import __version__
from oh.core.canonical import canonical_bytes, canonical_text, parse_json, sha256_hex
from oh.core.changes import Applied, LogEntry, Refused, RememberResult, parse_changes
from oh.core.notebook import Notebook
from oh.core.records import Record, StoredRecord
from oh.core.reviewed import Decision, Proposal, ReviewedRecord, Source
from oh.errors import OhError
from oh.knowledge import Decided, Knowledge
from oh.notebooks import ForgetReport, Notebooks, PurgeReport, purge_expired
from oh.storage.base import KnowledgeSource, KnowledgeStore, MemoryStore, PurgeAccess
from oh.storage.libsql import LibsqlMemoryStore, LibsqlPurgeAccess
from oh.storage.libsql_knowledge import LibsqlKnowledgeStore
from oh.tools import Caller, Tools
from oh.verify import VerifyReport, rebuild, verify_knowledge, verify_notebook, verify_store
from oh.view import NotebookView, view_of

__all__ = [
    "Applied",
    "Caller",
    "Decided",
    "Decision",
    "ForgetReport",
    "Knowledge",
    "KnowledgeSource",
    "KnowledgeStore",
    "LibsqlKnowledgeStore",
    "LibsqlMemoryStore",
    "LibsqlPurgeAccess",
    "LogEntry",
    "MemoryStore",
    "Notebook",
    "NotebookView",
    "Notebooks",
    "OhError",
    "Proposal",
    "PurgeAccess",
    "PurgeReport",
    "Record",
    "Refused",
    "RememberResult",
    "ReviewedRecord",
    "Source",
    "StoredRecord",
    "Tools",
    "VerifyReport",
    "__version__",
    "canonical_bytes",
    "canonical_text",
    "parse_changes",
    "parse_json",
    "purge_expired",
    "rebuild",
    "sha256_hex",
    "verify_knowledge",
    "verify_notebook",
    "verify_store",
    "view_of",
]
