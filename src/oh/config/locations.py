"""Where Oh keeps its data (``Locations``): a data directory with the two embedded databases,
or URLs, and the keys directory beside it (``oh.config``)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from oh.errors import InvalidArgument, NotFound
from oh.storage.backends import backend_of
from oh.storage.key_stores import KeyStorePlace, key_store_place
from oh.storage.sqlite.notebooks import DRIVERS, Driver

__all__ = ["DEFAULT_DATA_DIR", "UNSEALED_ENV", "Locations", "embedded_driver"]


DEFAULT_DATA_DIR = "oh-data"


UNSEALED_ENV = "OH_UNSEALED"  # "1": the explicit opt-out of sealing (``Locations.sealed``)


@dataclass(frozen=True, slots=True)
class Locations:
    data_dir: Path
    memory_url: str | None = None
    knowledge_url: str | None = None
    create: bool = True  # may opening create the data directory and missing database files?
    driver: Driver = "sqlite3"  # how the embedded files are opened (``OH_EMBEDDED_DRIVER``)
    keys_dir: Path | None = None  # ``--keys`` / ``OH_KEYS``; None: beside the data directory
    # ``--keys-url`` / ``OH_KEYS_URL``: the key store in a PostgreSQL database every server
    # shares; None: the key store file in the keys directory.
    keys_url: str | None = None
    # False is the one opt-out of sealing (``OH_UNSEALED=1``): notes kept in plain text, with a
    # warning each time the stores open. Sealed is the default everywhere (docs/keys.md).
    sealed: bool = True

    def __post_init__(self) -> None:
        # ``Locations("oh-data")`` as readily as ``Locations(Path("oh-data"))``: a path given as
        # text is a path (anything else is a typed error here, not a TypeError deep inside).
        for name in ("data_dir", "keys_dir"):
            value = getattr(self, name)
            if isinstance(value, str):
                object.__setattr__(self, name, Path(value))
            elif not (isinstance(value, Path) or (value is None and name == "keys_dir")):
                raise InvalidArgument(f"Locations.{name} is a path (str or pathlib.Path)")

    @classmethod
    def resolve(
        cls,
        data_dir: str | None = None,
        memory_url: str | None = None,
        knowledge_url: str | None = None,
        *,
        create: bool = True,
        keys_dir: str | None = None,
        keys_url: str | None = None,
    ) -> Locations:
        """Explicit values win over the environment, which wins over the defaults."""
        keys = keys_dir or os.environ.get("OH_KEYS") or None
        return cls(
            data_dir=Path(data_dir or os.environ.get("OH_DATA") or DEFAULT_DATA_DIR),
            memory_url=memory_url or os.environ.get("OH_MEMORY_URL") or None,
            knowledge_url=knowledge_url or os.environ.get("OH_KNOWLEDGE_URL") or None,
            create=create,
            driver=embedded_driver(os.environ),
            keys_dir=None if keys is None else Path(keys),
            keys_url=keys_url or os.environ.get("OH_KEYS_URL") or None,
            sealed=os.environ.get(UNSEALED_ENV, "") not in ("1", "true", "yes"),
        )

    def keys_path(self) -> Path:
        """The keys directory: ``keys_dir``, or the data directory's sibling ``<name>-keys``
        (outside the directory operators back up, so its backups never hold a data key)."""
        if self.keys_dir is not None:
            return self.keys_dir
        data = self.data_dir.resolve() if self.data_dir.name in ("", "..") else self.data_dir
        if not data.name:
            raise InvalidArgument(f"the data directory {data} has no name to put -keys after")
        return data.with_name(data.name + "-keys")

    def key_store(self) -> KeyStorePlace:
        """Where the key store is: the database ``keys_url`` names, else ``keys.db`` in the
        keys directory."""
        return key_store_place(self.keys_path(), self.keys_url)

    def memory_path(self) -> Path:
        return _embedded_path(self.memory_url, self.data_dir / "memory.db", self.create)

    def knowledge_path(self) -> Path:
        return _embedded_path(self.knowledge_url, self.data_dir / "knowledge.db", self.create)

    def existing_memory_path(self) -> Path | None:
        """The embedded memory file if it exists; nothing is created."""
        try:
            path = _embedded_path(self.memory_url, self.data_dir / "memory.db", False)
        except NotFound:
            return None  # no data directory: no file
        return path if path.is_file() else None

    def prepare(self, *, memory: bool = True, knowledge: bool = True) -> None:
        """Check (or, with ``create``, make) every embedded location a command is about to
        open, before it opens any: a command that needs both databases and is refused the
        second must not have created the first."""
        if memory:
            backend_of(self.memory_url).check(self.memory_path)
        if knowledge:
            backend_of(self.knowledge_url).check(self.knowledge_path)


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
