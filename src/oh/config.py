"""Where Oh keeps its data, and the one module that picks the concrete backend for it.

It sits at the top, beside the command line: nothing in the library imports it. Everything
below takes stores and services already open; this module opens them for a set of
``Locations``: the stores (``open_memory_store``, ``open_knowledge_store``,
``open_purge_access``), the recall service (``open_recall``) and the reference host over them
(``open_host``, ``open_agent_host``; ``close_host`` closes what they opened).

Locations: a data directory with the two embedded databases, or URLs.

``--data DIR`` (``OH_DATA``, default ``./oh-data``) holds ``memory.db`` and ``knowledge.db``.
``--memory-url`` / ``--knowledge-url`` (``OH_MEMORY_URL``, ``OH_KNOWLEDGE_URL``) override either
database: a file path, ``file:PATH`` or ``libsql:PATH`` for the embedded backend, or
``postgresql://...`` for PostgreSQL (the ``postgres`` extra). ``OH_EMBEDDED_DRIVER`` picks how the
embedded files are opened: ``sqlite3`` (the default, the standard library's SQLite) or ``libsql``
(the libsql package); both read and write the same files (docs/design.md, "The embedded driver").

Opening an embedded database may create it: ``Locations(create=True)``, the library's default,
makes the data directory and the database files as needed. The command line opens only what
exists (``oh.cli.options.read_locations``): a data directory or an embedded database file that
is not there is refused with ``not_found`` before anything is created, so a mistyped ``--data``
never yields fresh empty databases that verify as OK. Only ``oh serve`` and ``oh token create``,
the commands that start a data directory, pass ``create=True``.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

from oh.core.clock import Clock, system_clock
from oh.errors import InvalidArgument, NotFound
from oh.host import Host, HostSettings
from oh.storage.base import HostRegistry, KnowledgeStore, MemoryStore, PurgeAccess
from oh.storage.libsql import DRIVERS, Driver, LibsqlMemoryStore, Synchronous
from oh.storage.libsql_knowledge import LibsqlKnowledgeStore

__all__ = [
    "DEFAULT_DATA_DIR",
    "RECALL_MODES",
    "Locations",
    "RecallConfig",
    "close_host",
    "close_recall",
    "embedded_driver",
    "is_postgres_url",
    "open_agent_host",
    "open_host",
    "open_host_registry",
    "open_knowledge_store",
    "open_memory_store",
    "open_purge_access",
    "open_recall",
]

DEFAULT_DATA_DIR = "oh-data"


@dataclass(frozen=True, slots=True)
class Locations:
    data_dir: Path
    memory_url: str | None = None
    knowledge_url: str | None = None
    create: bool = True  # may opening create the data directory and missing database files?
    driver: Driver = "sqlite3"  # how the embedded files are opened (``OH_EMBEDDED_DRIVER``)

    @classmethod
    def resolve(
        cls,
        data_dir: str | None = None,
        memory_url: str | None = None,
        knowledge_url: str | None = None,
        *,
        create: bool = True,
    ) -> Locations:
        """Explicit values win over the environment, which wins over the defaults."""
        return cls(
            data_dir=Path(data_dir or os.environ.get("OH_DATA") or DEFAULT_DATA_DIR),
            memory_url=memory_url or os.environ.get("OH_MEMORY_URL") or None,
            knowledge_url=knowledge_url or os.environ.get("OH_KNOWLEDGE_URL") or None,
            create=create,
            driver=embedded_driver(os.environ),
        )

    def memory_path(self) -> Path:
        return _embedded_path(self.memory_url, self.data_dir / "memory.db", self.create)

    def knowledge_path(self) -> Path:
        return _embedded_path(self.knowledge_url, self.data_dir / "knowledge.db", self.create)

    def prepare(self, *, memory: bool = True, knowledge: bool = True) -> None:
        """Check (or, with ``create``, make) every embedded location a command is about to
        open, before it opens any: a command that needs both databases and is refused the
        second must not have created the first."""
        if memory and not is_postgres_url(self.memory_url):
            self.memory_path()
        if knowledge and not is_postgres_url(self.knowledge_url):
            self.knowledge_path()


_STARTS_DATA = "only oh serve and oh token create start one"


def embedded_driver(environ: Mapping[str, str]) -> Driver:
    """The embedded driver ``OH_EMBEDDED_DRIVER`` names (``sqlite3`` when unset or empty)."""
    chosen = environ.get("OH_EMBEDDED_DRIVER") or "sqlite3"
    for driver in DRIVERS:
        if chosen == driver:
            return driver
    raise InvalidArgument(f"OH_EMBEDDED_DRIVER must be one of {', '.join(DRIVERS)}, not {chosen!r}")


def _embedded_path(url: str | None, default: Path, create: bool) -> Path:
    if url is None:
        directory = default.parent
        if create:
            _make_directory(directory)
        elif not directory.is_dir():
            what = "is not a directory" if directory.exists() else "does not exist"
            raise NotFound(f"data directory {directory} {what} ({_STARTS_DATA})")
        return default
    for prefix in ("libsql:", "file:"):
        if url.startswith(prefix):
            url = url[len(prefix) :].removeprefix("//")
            break
    else:
        if "://" in url:
            scheme = url.split("://", 1)[0]
            raise InvalidArgument(f"no storage backend for {scheme}:// URLs in this install")
    path = Path(url)
    if create:
        _make_directory(path.parent)
    elif not path.is_file():
        what = "is not a file" if path.exists() else "does not exist"
        raise NotFound(f"database {path} {what} ({_STARTS_DATA})")
    return path


def _make_directory(directory: Path) -> None:
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file in the way, no permission: bad input, not a crash
        raise InvalidArgument(f"cannot create data directory {directory}: {exc.strerror}") from exc


def is_postgres_url(url: str | None) -> bool:
    """Whether ``url`` names a PostgreSQL database: it starts ``postgresql://`` or
    ``postgres://``, exactly as libpq reads a connection URI (lower case only). Anything else,
    a bare ``postgres`` included, is for the embedded backend to take as a path or refuse."""
    return url is not None and url.startswith(("postgresql://", "postgres://"))


def open_memory_store(locations: Locations, synchronous: Synchronous = "FULL") -> MemoryStore:
    if is_postgres_url(locations.memory_url):
        from oh.storage.postgres import open_postgres_memory

        return open_postgres_memory(str(locations.memory_url))
    return LibsqlMemoryStore(
        locations.memory_path(), synchronous=synchronous, driver=locations.driver
    )


def open_knowledge_store(locations: Locations, synchronous: Synchronous = "FULL") -> KnowledgeStore:
    if is_postgres_url(locations.knowledge_url):
        from oh.storage.postgres_knowledge import open_postgres_knowledge

        return open_postgres_knowledge(str(locations.knowledge_url))
    return LibsqlKnowledgeStore(
        locations.knowledge_path(), synchronous=synchronous, driver=locations.driver
    )


def open_host_registry(locations: Locations) -> HostRegistry:
    """The reference host's registry lives in the knowledge database."""
    if is_postgres_url(locations.knowledge_url):
        from oh.storage.postgres_host import PostgresHostRegistry

        return PostgresHostRegistry(str(locations.knowledge_url))
    from oh.storage.libsql_host import LibsqlHostRegistry

    return LibsqlHostRegistry(locations.knowledge_path(), driver=locations.driver)


def open_purge_access(locations: Locations) -> PurgeAccess:
    """The purge worker's credential on the memory database."""
    if is_postgres_url(locations.memory_url):
        from oh.storage.postgres import open_postgres_purge

        return open_postgres_purge(str(locations.memory_url))
    from oh.storage.libsql import LibsqlPurgeAccess

    return LibsqlPurgeAccess(locations.memory_path())


def open_recall(
    locations: Locations, embedder: str | None = None, *, clock: Clock = system_clock
) -> Any:
    """The recall service over the embedded memory database (``OH_EMBEDDER`` picks the
    embedder: ``hashing`` by default, ``local``, ``openai``). ``clock`` must be the host's:
    recall answers only for notebooks that are open by it. ``close_recall`` closes it."""
    if is_postgres_url(locations.memory_url):
        raise InvalidArgument("recall needs the embedded memory database in this release")
    from oh.recall import Recall, embedder_from_env
    from oh.storage.libsql_vectors import LibsqlVectorStore

    return Recall(
        open_memory_store(locations),
        LibsqlVectorStore(locations.memory_path(), driver=locations.driver),
        embedder_from_env(kind=embedder),
        open_knowledge_store(locations),
        clock=clock,
    )


def close_recall(recall: Any) -> None:
    """Close what ``open_recall`` opened: its stores and the embedder's connections."""
    for part in (recall.memory, recall.vectors, recall.knowledge, recall.embedder):
        close = getattr(part, "close", None)
        if close is not None:
            close()


RECALL_MODES = ("off", "shadow", "on")


@dataclass(frozen=True, slots=True)
class RecallConfig:
    """How a serving host offers ``recall``, the same for ``oh serve`` and ``oh mcp``.

    ``mode``: ``--recall`` or ``OH_RECALL`` — ``shadow`` (computed and measured, the agent gets
    no rows; the default on the embedded backend), ``on``, or ``off`` (no recall tool; the
    default on PostgreSQL, where this release keeps no vectors). ``deadline``: seconds one
    recall may take, ``--recall-deadline`` or ``OH_RECALL_DEADLINE`` (None: the host default).
    """

    mode: str
    deadline: float | None = None

    @property
    def enabled(self) -> bool:
        return self.mode != "off"

    @property
    def shadow(self) -> bool:
        return self.mode != "on"

    @classmethod
    def resolve(
        cls,
        locations: Locations,
        mode: str | None = None,
        deadline: float | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> RecallConfig:
        """Explicit values win over the environment, which wins over the defaults."""
        env = os.environ if environ is None else environ
        chosen = mode or env.get("OH_RECALL") or None
        if chosen is None:
            chosen = "off" if is_postgres_url(locations.memory_url) else "shadow"
        if chosen not in RECALL_MODES:
            raise InvalidArgument(
                f"recall must be one of {', '.join(RECALL_MODES)}, not {chosen!r}"
            )
        seconds: float | None = deadline
        raw = env.get("OH_RECALL_DEADLINE")
        if seconds is None and raw:
            try:
                seconds = float(raw)
            except ValueError:
                raise InvalidArgument(f"OH_RECALL_DEADLINE must be seconds, not {raw!r}") from None
        if seconds is not None and not 0 < seconds < math.inf:
            raise InvalidArgument("the recall deadline must be a positive number of seconds")
        return cls(chosen, seconds)


def open_host(locations: Locations, **options: Any) -> Host:
    """The reference host over the configured memory and knowledge databases."""
    locations.prepare()  # refuse a missing location before opening (and creating) the other
    return Host(
        open_memory_store(locations),
        open_knowledge_store(locations),
        open_host_registry(locations),
        **options,
    )


def open_agent_host(
    locations: Locations,
    recall: RecallConfig | None = None,
    *,
    public_url: str = "",
    owner_token_command: str | None = None,
    catch_up_every: float = 1.0,
) -> Host:
    """The host ``oh serve`` and ``oh mcp`` serve agents from: recall as ``recall`` says
    (``RecallConfig.resolve`` by default: ``--recall`` / ``OH_RECALL``), with its deadline and,
    when enabled, the catch-up loop running. ``Host.stop`` ends it; ``close_host`` closes all."""
    locations.prepare()  # refuse a missing location before recall opens (and creates) one
    config = recall or RecallConfig.resolve(locations)
    service = open_recall(locations) if config.enabled else None
    settings = HostSettings(public_url=public_url, recall_shadow=config.shadow)
    if owner_token_command is not None:
        settings = replace(settings, owner_token_command=owner_token_command)
    if config.deadline is not None:
        settings = replace(settings, recall_deadline=timedelta(seconds=config.deadline))
    host = open_host(locations, settings=settings, recall=service)
    if service is not None:
        host.start_catch_up(catch_up_every)
    return host


def close_host(host: Host) -> None:
    """Stop ``host``'s background work, then close its stores and its recall service's.

    The recall service's stores stay open if a background thread still uses them (it is
    waiting for a slow embedder): closing a libSQL connection under a thread that then uses
    it aborts that thread noisily. The process is ending anyway."""
    stopped = host.stop()
    host.close(close_recall if stopped else None)
