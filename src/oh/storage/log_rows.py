"""The log's rows as both SQL backends keep them: one row per entry, its changes in the columns
``op``, ``name``, ``content`` and ``digest`` (one change: each column that change's value;
several: each a JSON array of the values in order; ``changes`` counts them).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from oh.core.changes import LogEntry, LoggedChange

__all__ = [
    "LOG_COLUMNS",
    "LOG_PAGE_CHANGES",
    "change_columns",
    "entry_from_row",
    "json_rows",
    "new_tuple",
]

# Values as one JSON array (or rows as an array of arrays), which SQLite's json_each and ->>
# and PostgreSQL's json functions read back exactly: the standard library writes every string
# losslessly (ensure_ascii=False: characters stay literal, only quotes, backslashes and
# controls are escaped), None as null and integers as integers.
json_rows = json.JSONEncoder(ensure_ascii=False, check_circular=False, separators=(",", ":")).encode

LOG_COLUMNS = (
    "version, request_id, fingerprint, author, written_at, prev_hash, hash,"
    " changes, op, name, content, digest"
)
# A page of ``log``: about this many changes (and at most ``batch`` entries). Small pages keep
# memory flat and are faster too (measured: 500 changes a page reads ~10% faster than 2,000).
LOG_PAGE_CHANGES = 500
new_tuple = tuple.__new__  # builds a named tuple from a row without its Python-level __new__


def change_columns(
    changes: Sequence[LoggedChange],
) -> tuple[int, str, str, str | None, str | None]:
    """An entry's changes as the log row keeps them: ``(count, op, name,
    content, digest)``, each column the change's value, or with several changes a JSON array
    of the values in order."""
    if len(changes) == 1:
        op, name, content, digest = changes[0]
        return 1, op, name, content, digest
    return (
        len(changes),
        json_rows([c.op for c in changes]),
        json_rows([c.name for c in changes]),
        json_rows([c.content for c in changes]),
        json_rows([c.digest for c in changes]),
    )


def entry_from_row(notebook_id: str, row: Sequence[Any]) -> LogEntry:
    """The ``LogEntry`` a log row (``LOG_COLUMNS``) holds.

    Raises ``ValueError`` when the columns do not hold a readable list of changes (a count that
    disagrees with the arrays, an array that is not JSON): a damaged row, which ``verify``
    reports as such. Values of the wrong type are passed through for ``verify`` to judge.
    """
    version, request_id, fingerprint, author, written_at, prev_hash, hash_, count = row[:8]
    if count == 1:
        changes: tuple[LoggedChange, ...] = (new_tuple(LoggedChange, row[8:]),)
    else:
        if type(count) is not int or not 1 < count <= 64:
            raise ValueError(f"log entry {version} counts {count!r} changes")
        columns = [json.loads(value) if type(value) is str else value for value in row[8:]]
        if not all(type(value) is list and len(value) == count for value in columns):
            raise ValueError(f"log entry {version} does not hold its {count} changes")
        changes = tuple([new_tuple(LoggedChange, change) for change in zip(*columns, strict=True)])
    return new_tuple(
        LogEntry,
        (
            notebook_id,
            version,
            request_id,
            fingerprint,
            author,
            written_at,
            changes,
            prev_hash,
            hash_,
        ),
    )
