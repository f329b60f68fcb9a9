"""Oh: working memory for AI agents, kept strictly apart from reviewed knowledge.

The public surface is re-exported here; ``__all__`` is checked by a test.
"""

from oh.core.canonical import canonical_bytes, canonical_text, parse_json, sha256_hex
from oh.core.changes import Applied, LogEntry, Refused, RememberResult, parse_changes
from oh.core.notebook import Notebook
from oh.core.records import Record, StoredRecord
from oh.errors import OhError
from oh.notebooks import ForgetReport, Notebooks, PurgeReport, purge_expired
from oh.storage.base import MemoryStore, PurgeAccess
from oh.storage.libsql import LibsqlMemoryStore, LibsqlPurgeAccess
from oh.verify import VerifyReport, rebuild, verify_notebook, verify_store

__version__ = "0.1.0"

__all__ = [
    "Applied",
    "ForgetReport",
    "LibsqlMemoryStore",
    "LibsqlPurgeAccess",
    "LogEntry",
    "MemoryStore",
    "Notebook",
    "Notebooks",
    "OhError",
    "PurgeAccess",
    "PurgeReport",
    "Record",
    "Refused",
    "RememberResult",
    "StoredRecord",
    "VerifyReport",
    "__version__",
    "canonical_bytes",
    "canonical_text",
    "parse_changes",
    "parse_json",
    "purge_expired",
    "rebuild",
    "sha256_hex",
    "verify_notebook",
    "verify_store",
]
