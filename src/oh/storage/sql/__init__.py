"""What the SQL backends share: the small interface a database offers the shared statements.

A backend module keeps its driver, its connections, its error translation and the SQL only its
database speaks. Statements both databases run are written once, above this interface, with
``?`` placeholders: the embedded driver takes them as they are, and the PostgreSQL backend hands
the shared code a connection that rewrites them (``QmarkConnection``). Shared SQL therefore never
uses ``?`` for anything but a parameter (PostgreSQL's JSON ``?`` operator is not available to it)
and never names a numbered parameter (``?1``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from functools import lru_cache
from typing import Any, Protocol

__all__ = ["Connection", "Cursor", "QmarkConnection", "SqlDatabase", "percent_placeholders"]


class Cursor(Protocol):
    """What shared code reads from a statement's result."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> Sequence[Any]: ...

    def fetchmany(self, size: int) -> Sequence[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """A connection inside one of the database's transactions, taking ``?`` placeholders."""

    def execute(self, sql: str, parameters: Sequence[Any] = ...) -> Cursor: ...

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> Any: ...


class SqlDatabase(Protocol):
    """The transactions a SQL backend offers the shared statements; driver errors raised inside
    them leave as ``OhError``s (each backend's one translation)."""

    # Appended to a SELECT that must lock the rows it reads until the transaction ends: nothing
    # on libSQL, whose write transactions (BEGIN IMMEDIATE) exclude every other writer.
    FOR_UPDATE: str

    def _write(self) -> AbstractContextManager[Connection]:
        """One write transaction, committed at the end, rolled back on any error."""
        ...

    def _read(self) -> AbstractContextManager[Connection]:
        """One read transaction seeing one snapshot across its statements."""
        ...

    def _statement(self) -> AbstractContextManager[Connection]:
        """A connection for one statement, which the database makes atomic on its own (no
        explicit transaction where none is needed: the cheapest way to read one row)."""
        ...


@lru_cache(maxsize=1024)
def percent_placeholders(sql: str) -> str:
    """``sql`` with each ``?`` written as psycopg's ``%s`` (and a literal ``%`` doubled)."""
    return sql.replace("%", "%%").replace("?", "%s")


class QmarkConnection:
    """A psycopg connection that takes the shared statements' ``?`` placeholders."""

    __slots__ = ("_conn",)

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> Any:
        return self._conn.execute(percent_placeholders(sql), parameters)

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        with self._conn.cursor() as cursor:
            cursor.executemany(percent_placeholders(sql), rows)
