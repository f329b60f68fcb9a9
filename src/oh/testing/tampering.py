"""How the conformance suites change stored data behind Oh's back.

Two kinds of test tamper with storage. Most change rows and check that ``verify`` (or a read)
notices: they describe the change as an ``Edit``, which a harness with a SQL database runs as
one statement (``Edit.sql``) and a backend without one (``oh.storage.memory``) applies to its
own rows (``harness.tamper``). A few check what the database itself refuses to raw SQL (a
duplicate key, reopening a tombstone, the purge credential's limits): they need the harness's
raw SQL channel, and where the harness has none they skip (``require_sql``), since a backend
whose storage only its own code writes has nothing there to refuse (its harness declares so,
``oh.testing.declared``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from oh.errors import Purged
from oh.keys import Keyring
from oh.storage.rows import insert
from oh.testing.declared import RAW_SQL, not_offered

__all__ = ["TOKEN_COLUMNS", "Edit", "require_sql"]

# The columns a sealed database keeps as tokens, by the token's column (``NotebookCipher.token``).
TOKEN_COLUMNS = {
    "name": "name",
    "kind": "kind",
    "digest": "digest",
    "request_id": "request",
    "fingerprint": "fingerprint",
    "prev_hash": "hash",
    "hash": "hash",
    "head_hash": "hash",
    "answer_id": "answer",
}


@dataclass(frozen=True, slots=True)
class Edit:
    """A change to the rows of one table, in the SQL backends' table and column names.

    ``update`` (the default) gives each ``values`` column its value in the rows where every
    ``where`` column holds its value, and with ``substitute = (column, old, new)`` replaces
    ``old`` by ``new`` in that column's text; ``delete`` removes those rows; ``insert`` adds
    the one row ``values`` (``where`` unused).
    """

    table: str
    where: Mapping[str, Any] = field(default_factory=dict)
    values: Mapping[str, Any] = field(default_factory=dict)
    substitute: tuple[str, str, str] | None = None
    action: Literal["update", "delete", "insert"] = "update"

    def tokened(self, keyring: Keyring) -> Edit:
        """This edit for a sealed database, whose rows keep names, kinds, digests, request
        ids, fingerprints, hashes and answer ids as tokens of their notebook
        (``NotebookCipher.token``): each such value written as a plain string here becomes its
        token, so the edit finds and writes the rows it means. The notebook is the one the
        edit names (``notebook_id`` or a notebook's ``id``); without one, or without its key,
        the edit is left as it is."""
        notebook_id = self.where.get("notebook_id", self.values.get("notebook_id"))
        if notebook_id is None and self.table == "notebooks":
            notebook_id = self.where.get("id", self.values.get("id"))
        if type(notebook_id) is not str:
            return self
        try:
            cipher = keyring.cipher(notebook_id)
        except Purged:
            return self

        def tokens(columns: Mapping[str, Any]) -> dict[str, Any]:
            return {
                column: cipher.token(value, TOKEN_COLUMNS[column])
                if column in TOKEN_COLUMNS and type(value) is str
                else value
                for column, value in columns.items()
            }

        return Edit(
            self.table, tokens(self.where), tokens(self.values), self.substitute, self.action
        )

    def sql(self) -> tuple[str, tuple[Any, ...]]:
        """The edit as one statement with ``?`` placeholders, and its parameters."""
        if self.action == "insert":
            return insert(self.table, ", ".join(self.values), "?"), tuple(self.values.values())
        where = " AND ".join(f"{column} = ?" for column in self.where)
        condition = f" WHERE {where}" if where else ""
        if self.action == "delete":
            return f"DELETE FROM {self.table}{condition}", tuple(self.where.values())
        assignments = [f"{column} = ?" for column in self.values]
        params: tuple[Any, ...] = tuple(self.values.values())
        if self.substitute is not None:
            column, old, new = self.substitute
            assignments.append(f"{column} = replace({column}, ?, ?)")
            params += (old, new)
        sql = f"UPDATE {self.table} SET {', '.join(assignments)}{condition}"
        return sql, params + tuple(self.where.values())


def require_sql(harness: object, channel: str) -> None:
    """Go on only if ``harness`` has the raw SQL method ``channel`` (``execute``,
    ``purge_execute``, ``execute_knowledge``) the test sends its statements through; a harness
    without it must declare that it has no database beneath (``oh.testing.declared``)."""
    if not callable(getattr(harness, channel, None)):
        not_offered(
            harness,
            RAW_SQL,
            "no database beneath the backend's own code, so nothing there can refuse raw SQL",
        )
