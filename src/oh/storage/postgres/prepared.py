"""One statement prepared on each connection and sent through libpq itself (psycopg's ``pq``
layer): the accelerator of the hot ``remember`` on PostgreSQL.

psycopg's ordinary ``execute`` spends about 50 µs of client CPU a call on this machine before
and after the round trip (the cursor, the query's conversion, parameter dumpers, a
non-blocking wait loop of several system calls). ``PGconn.exec_prepared`` sends the same
Bind/Execute/Sync and waits in libpq with the GIL released: measured on one connection, 4,000
single-change remember calls, 39 µs of client CPU a call against 88-96 µs, and 233 µs against
305 µs of wall time.

It is an accelerator, not a second path to get right: whatever it does not answer cleanly —
an unprepared or non-UTF-8 connection, a value PostgreSQL text cannot hold, an error of any
kind, a cut connection — it answers ``None`` and the caller sends the call the ordinary way,
which raises the translated error (``remember`` is idempotent by its request id, and a call
that failed committed nothing). The statement is prepared when a connection joins the pool,
so the first call on it is still one round trip.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from weakref import WeakSet

__all__ = ["PreparedCall"]

_TUPLES_OK = 2  # psycopg.pq.ExecStatus.TUPLES_OK
_COMMAND_OK = 1  # psycopg.pq.ExecStatus.COMMAND_OK
_SQLSTATE = ord("C")  # psycopg.pq.DiagnosticField.SQLSTATE
_NO_SUCH_STATEMENT = b"26000"  # invalid_sql_statement_name: the statement is gone (DISCARD ALL)
_ALREADY_PREPARED = b"42P05"  # duplicate_prepared_statement


class PreparedCall:
    """``sql`` (with ``$1``… placeholders, text results) prepared as ``name`` on every
    connection ``prepare`` is given. Thread-safe: a connection is used by one thread at a time."""

    def __init__(self, name: str, sql: str) -> None:
        self._name = name.encode("ascii")
        self._sql = sql.encode("utf-8")
        self._ready: WeakSet[Any] = WeakSet()  # the connections it is prepared on
        self._tried: WeakSet[Any] = WeakSet()  # those a call found unprepared and tried once

    def prepare(self, conn: Any) -> bool:
        """Prepare on ``conn`` (a psycopg connection, idle), if it talks UTF-8; otherwise, or if
        the statement cannot be prepared yet (its function not migrated), leave it unprepared.
        The pool calls this for each new connection, the store once more after migrating."""
        if conn.info.encoding != "utf-8":
            return False
        result = conn.pgconn.prepare(self._name, self._sql)
        if result.status == _COMMAND_OK or result.error_field(_SQLSTATE) == _ALREADY_PREPARED:
            self._ready.add(conn)
            return True
        return False

    def __call__(self, conn: Any, params: Sequence[str | int | None]) -> list[bytes | None] | None:
        """The first row's values as text, or None when the call was not answered cleanly."""
        if conn not in self._ready:
            # A connection that joined before the statement could be prepared: once, here.
            if conn in self._tried:
                return None
            self._tried.add(conn)
            if not self.prepare(conn):
                return None
        values: list[bytes | None] = []
        for value in params:
            if value is None:
                values.append(None)
            elif type(value) is int:
                values.append(b"%d" % value)
            elif "\x00" in value:  # type: ignore[operator]
                return None  # libpq would cut the text at it: the ordinary path refuses it
            else:
                values.append(value.encode("utf-8"))  # type: ignore[union-attr]
        result = conn.pgconn.exec_prepared(self._name, values)
        if result.status != _TUPLES_OK or result.ntuples != 1:
            if result.error_field(_SQLSTATE) == _NO_SUCH_STATEMENT:
                # Gone (DISCARD ALL, a pooler that moved the session): prepared again on the
                # next call, once per connection at most.
                self._ready.discard(conn)
            return None
        return [result.get_value(0, column) for column in range(result.nfields)]
