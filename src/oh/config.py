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

Keys (docs/keys.md): ``--keys DIR`` (``OH_KEYS``, default the data directory's sibling
``<name>-keys``, so ``./oh-data`` has ``./oh-data-keys``) holds the master key file and the key
store, deliberately outside the data directory operators back up. ``OH_MASTER_KEY`` overrides
the key file. ``open_keyring`` (the embedded memory store's) and ``knowledge_macs`` (every
knowledge store's) open what is configured and never create a key; ``start_master_key`` is what
a command that starts a data directory does when none is configured. ``rotate_master_key`` (and
its steps) replaces the key file's key.
"""

from __future__ import annotations

import math
import os
import sys
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any, cast

from oh.core.clock import Clock, system_clock
from oh.errors import AlreadyExists, InvalidArgument, NotFound, StorageUnavailable
from oh.host import Host, HostSettings
from oh.keys import (
    KEY_FILE,
    MASTER_KEY_ENV,
    MASTER_MARKER,
    NEXT_KEY_FILE,
    Keyring,
    KeyStore,
    MasterKey,
    MasterKeys,
    load_master_keys,
    losing_it,
    read_master_key,
    write_master_key,
)
from oh.keys.macs import AuthenticatedKnowledge, KnowledgeMacs, Remaced, remac
from oh.keys.sealing import LOST_KEYS_FIX, check_keys_fit
from oh.storage.backends import backend_of
from oh.storage.base import HostRegistry, KnowledgeStore, MemoryStore, PurgeAccess
from oh.storage.key_stores import KeyStorePlace, key_store_place
from oh.storage.libsql import DRIVERS, Driver, Synchronous
from oh.storage.urls import is_postgres_url, masked_url

__all__ = [
    "DEFAULT_DATA_DIR",
    "RECALL_MODES",
    "UNSEALED_ENV",
    "KeyStatus",
    "Locations",
    "RecallConfig",
    "Rotation",
    "UnsealedWarning",
    "begin_rotation",
    "check_rotation",
    "close_host",
    "close_recall",
    "create_master_key",
    "embedded_driver",
    "finish_rotation",
    "is_postgres_url",
    "key_status",
    "knowledge_macs",
    "masked_url",
    "open_agent_host",
    "open_host",
    "open_host_registry",
    "open_keyring",
    "open_knowledge_store",
    "open_memory_store",
    "open_purge_access",
    "open_recall",
    "open_vector_store",
    "remac_knowledge",
    "rewrap_data_keys",
    "rotate_master_key",
    "sealed_memory",
    "start_master_key",
]

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


# -- keys (docs/keys.md) -------------------------------------------------------------------


def open_keyring(locations: Locations) -> Keyring | None:
    """The keyring of the configured master key (``OH_MASTER_KEY``, else the key file) over the
    key store. Where the locations may create (``Locations.create``, the library's default),
    a missing master key is created first, exactly as ``oh serve`` does (``start_master_key``):
    every way of opening the stores seals. None only with the opt-out (``sealed=False``, which
    warns) or when no key is configured and none may be made; a sealed database then refuses
    to open. A location that may not create files refuses a missing key store (``not_found``)
    instead of starting an empty one, under which every sealed notebook would read as
    forgotten."""
    if not locations.sealed:
        _warn_unsealed(locations)
        return None
    created = start_master_key(locations)
    if created is not None:
        where = created.resolve()
        # Said once, on standard error, as oh serve says it: the key must be backed up.
        sys.stderr.write(f"oh: created the master key {where}\n")
        sys.stderr.write(f"oh: {losing_it(f'the master key file {where}')}\n")
        sys.stderr.flush()
    keys_dir = locations.keys_path()
    masters = load_master_keys(keys_dir, os.environ)
    if masters is None:
        return None
    place = _existing_key_store(locations)
    store = place.open()
    try:
        if place.shared:
            _claim_master(store, masters, place.where)
    except BaseException:
        store.close()
        raise
    return Keyring(masters, store)


def _claim_master(store: KeyStore, masters: MasterKeys, where: str) -> None:
    """A key store every server shares records the master key its data keys are wrapped by;
    a process given another key is refused before it makes one data key that the other
    servers could not open."""
    recorded = store.claim(MASTER_MARKER, masters.current.id)
    known = {key.id for key in (masters.current, *masters.others)}
    if recorded not in known:
        raise StorageUnavailable(
            f"the key store {where} is shared by servers whose master key is {recorded}, but"
            f" this process is given master key {masters.current.id}: give every Oh process"
            f" the same master key ({MASTER_KEY_ENV}); nothing was changed (docs/keys.md,"
            " A key store for many servers)"
        )


def _warn_unsealed(locations: Locations) -> None:
    message = (
        f"oh: {UNSEALED_ENV}=1 (Locations(sealed=False)): notes are kept in plain text in"
        f" {locations.data_dir}, and forgetting a notebook cannot reach its backups (docs/keys.md)"
    )
    warnings.warn(message, UnsealedWarning, stacklevel=3)


class UnsealedWarning(UserWarning):
    """The stores were opened with sealing turned off (``Locations.sealed`` is False)."""


def sealed_memory(locations: Locations) -> str | None:
    """Where the memory database is, if it exists and records that its notebooks are sealed;
    None otherwise. Read only: nothing is created or changed (a missing file stays missing)."""
    return backend_of(locations.memory_url).sealed_memory(locations)


def _existing_key_store(locations: Locations) -> KeyStorePlace:
    """The key store's place; ``not_found`` when it is missing and may not be created."""
    place = locations.key_store()
    if not locations.create and not place.exists():
        flags = "--keys-url or OH_KEYS_URL" if place.shared else "--keys or OH_KEYS"
        raise NotFound(
            f"a master key is configured but there is no key store at {place.where}"
            f" (pass {flags}, naming where the key store is; docs/keys.md)"
        )
    return place


def create_master_key(locations: Locations, *, write: bool = True) -> MasterKey:
    """A new master key for the keys directory: written to its key file (mode 0600), or with
    ``write=False`` only returned (to be kept in ``OH_MASTER_KEY``); the key store is created
    either way. ``already_exists`` when a master key is configured, or when the key store
    holds data keys already: a new key could not open them, and Oh never replaces a key."""
    keys_dir = locations.keys_path()
    key_file = keys_dir / KEY_FILE
    if os.environ.get(MASTER_KEY_ENV):
        raise AlreadyExists(f"{MASTER_KEY_ENV} is set: a master key is configured already")
    if key_file.exists():
        raise AlreadyExists(f"a master key file exists at {key_file}; Oh never overwrites one")
    place = locations.key_store()
    held = _data_keys(place)
    if held:
        raise AlreadyExists(
            f"the key store {place.where} holds {sum(held.values())} data keys wrapped by master"
            f" key {', '.join(sorted(held))}, which a new key cannot open: restore that key"
            " (docs/keys.md, Losing the master key)"
        )
    sealed = sealed_memory(locations)
    if sealed is not None:
        raise StorageUnavailable(
            f"the notebooks in {sealed} are sealed, but no master key is configured: there is"
            f" no {keys_dir / KEY_FILE} and {MASTER_KEY_ENV} is not set; Oh never makes a new"
            " master key over sealed data." + LOST_KEYS_FIX
        )
    key = MasterKey.generate()
    try:
        if write:
            write_master_key(key_file, key)
        place.open().close()
    except OSError as exc:
        raise InvalidArgument(f"cannot write to the keys directory {keys_dir}: {exc}") from exc
    return key


def start_master_key(locations: Locations) -> Path | None:
    """What a command that starts a data directory (``Locations.create``) does about keys:
    when no master key is configured, create one (``create_master_key``) and return its file,
    which the command names once in a warning; None when a key is configured (the key store
    is created if it is missing) or may not be created. Call it after ``Locations.prepare``, so
    a data directory that cannot be made leaves no key behind."""
    if not locations.create:
        return None
    keys_dir = locations.keys_path()
    place = locations.key_store()
    if load_master_keys(keys_dir, os.environ) is not None:
        if not place.exists():  # a key from OH_MASTER_KEY, say
            sealed = sealed_memory(locations)
            if sealed is not None:
                raise StorageUnavailable(
                    f"the notebooks in {sealed} are sealed, but there is no key store at"
                    f" {place.where}; Oh never starts an empty one over sealed data."
                    + LOST_KEYS_FIX
                )
            place.open().close()
        return None
    if place.shared:
        raise InvalidArgument(
            f"no master key is configured, and the key store {place.where} is shared by every"
            " server: Oh does not make a master key for one process alone. Make one once"
            f" (oh key create --stdout) and give it to every Oh process as {MASTER_KEY_ENV}"
            " (docs/keys.md, A key store for many servers)"
        )
    try:
        create_master_key(locations)
    except AlreadyExists:
        if (keys_dir / KEY_FILE).exists():  # another process starting beside this one made it
            return None
        raise
    return keys_dir / KEY_FILE


def _data_keys(place: KeyStorePlace) -> dict[str, int]:
    """How many data keys each master key wraps in the key store (none when it is absent)."""
    if not place.exists():
        return {}
    store = place.open_existing()
    try:
        return store.count()
    finally:
        store.close()


@dataclass(frozen=True, slots=True)
class KeyStatus:
    """What ``oh key status`` shows; never key material."""

    keys_dir: Path
    master_key_id: str | None  # None: no master key is configured
    source: str | None  # "environment" (OH_MASTER_KEY) or "file"
    key_file: Path | None  # the key file in use (source "file")
    key_store: str  # a file's absolute path, or a database URL with its password masked
    key_store_exists: bool
    data_keys: dict[str, int]  # how many each master key (by id) wraps
    unreadable_data_keys: int  # wrapped by a master key not configured: never opened here
    rotation_in_progress: bool  # ``master.key.next`` is there
    next_key_id: str | None
    # The key store is a database that every server shares (``OH_KEYS_URL``).
    key_store_shared: bool = False
    # What an operator must fix about where keys live (the key database in the memory cluster).
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "keys_dir": str(self.keys_dir),
            "master_key_id": self.master_key_id,
            "source": self.source,
            "key_file": None if self.key_file is None else str(self.key_file),
            "key_store": self.key_store,
            "key_store_exists": self.key_store_exists,
            "key_store_shared": self.key_store_shared,
            "data_keys": dict(sorted(self.data_keys.items())),
            "unreadable_data_keys": self.unreadable_data_keys,
            "rotation_in_progress": self.rotation_in_progress,
            "next_key_id": self.next_key_id,
            "warnings": list(self.warnings),
        }


def key_status(locations: Locations) -> KeyStatus:
    """The configured master key, the key store and any rotation in progress."""
    keys_dir = locations.keys_path()
    masters = load_master_keys(keys_dir, os.environ)
    from_env = bool(os.environ.get(MASTER_KEY_ENV))
    place = locations.key_store()
    upcoming = keys_dir / NEXT_KEY_FILE
    held = _data_keys(place)
    known = set() if masters is None else {key.id for key in (masters.current, *masters.others)}
    return KeyStatus(
        keys_dir=keys_dir.resolve(),
        master_key_id=None if masters is None else masters.current.id,
        source=None if masters is None else ("environment" if from_env else "file"),
        key_file=None if masters is None or from_env else (keys_dir / KEY_FILE).resolve(),
        key_store=place.where,
        key_store_exists=place.exists(),
        data_keys=held,
        unreadable_data_keys=sum(n for key_id, n in held.items() if key_id not in known),
        rotation_in_progress=upcoming.exists(),
        next_key_id=read_master_key(upcoming).id if upcoming.exists() else None,
        key_store_shared=place.shared,
        warnings=_key_place_warnings(locations),
    )


def _key_place_warnings(locations: Locations) -> tuple[str, ...]:
    """A key database in the cluster that holds the notes: the cluster's WAL archive and base
    backups then keep every data key that forgetting destroys, beside what it sealed."""
    if locations.keys_url is None:
        return ()
    from oh.storage.postgres_keys import cluster_id

    keys = cluster_id(locations.keys_url)
    found = []
    for what, url in (("memory", locations.memory_url), ("knowledge", locations.knowledge_url)):
        if backend_of(url).cluster(url) == keys:
            found.append(
                f"the key database is in the same PostgreSQL cluster as the {what} database:"
                " its backups and WAL archive keep the keys that forgetting destroys, beside"
                " the notes they seal; move the key store to a cluster of its own (docs/keys.md,"
                " A key store for many servers)"
            )
    return tuple(found)


@dataclass(frozen=True, slots=True)
class Rotation:
    """A rotation: the key ids before and after, how many data keys were rewrapped and how
    many knowledge rows MACed again, and the key file."""

    old_id: str
    new_id: str
    rewrapped: int
    key_file: Path
    remaced: int = 0  # knowledge rows MACed again


def check_rotation(locations: Locations) -> None:
    """Why the key file's key cannot be rotated, if it cannot: ``invalid_argument`` with
    ``OH_MASTER_KEY`` set, ``not_found`` without a key file."""
    if os.environ.get(MASTER_KEY_ENV):
        raise InvalidArgument(
            f"{MASTER_KEY_ENV} is set: oh key rotate rotates only the key file; to rotate a key"
            " kept in the environment follow docs/keys.md, Rotating the master key"
        )
    current = locations.keys_path() / KEY_FILE
    if not current.exists():
        raise NotFound(f"no master key file at {current} (oh key create makes one)")


def begin_rotation(locations: Locations) -> MasterKey:
    """Step 1 of ``rotate_master_key``: the next key, ``master.key.next``, read when a rotation
    that did not finish left it, else generated and written (durably, mode 0600)."""
    check_rotation(locations)
    upcoming = locations.keys_path() / NEXT_KEY_FILE
    if upcoming.exists():
        return read_master_key(upcoming)
    key = MasterKey.generate()
    try:
        write_master_key(upcoming, key)
    except OSError as exc:
        raise InvalidArgument(f"cannot write the next master key {upcoming}: {exc}") from exc
    return key


def rewrap_data_keys(locations: Locations, new: MasterKey) -> Rotation:
    """Step 2: every data key rewrapped under ``new`` in one transaction of the key store.
    The keyring opens with the key file's key and the next one, so this runs again after a
    crash anywhere; it repeats (a few times at most) while a data key is left under another
    key, one a process still on the old key made meanwhile."""
    keys_dir = locations.keys_path()
    masters = load_master_keys(keys_dir, os.environ)
    if masters is None:
        raise NotFound(f"no master key is configured in {keys_dir}")
    place = locations.key_store()
    if not place.exists():
        raise NotFound(f"no key store at {place.where}")
    store = place.open()
    keyring = Keyring(masters, store)
    try:
        rewrapped = keyring.rotate(new)
        for _ in range(3):
            if set(store.count()) <= {new.id}:
                break
            keyring.rotate(new)
        return Rotation(masters.current.id, new.id, rewrapped, (keys_dir / KEY_FILE).resolve())
    finally:
        keyring.close()


def remac_knowledge(locations: Locations, new: MasterKey) -> int:
    """Step 3: every row of the knowledge database MACed again under ``new``, each checked
    first under the key it carries (the key file's or the next one), in one transaction;
    return how many rows. Like the rewrap it runs again after a crash anywhere."""
    store = open_knowledge_store(locations)
    try:
        macs = store.macs if isinstance(store, AuthenticatedKnowledge) else None
        if macs is None:
            raise NotFound(f"no master key is configured in {locations.keys_path()}")
        masters = macs.masters
        others = tuple(key for key in (masters.current, *masters.others) if key != new)
        return remac(cast(Remaced, store), MasterKeys(new, others))
    finally:
        store.close()


def finish_rotation(locations: Locations) -> None:
    """Step 4: ``master.key.next`` becomes ``master.key``, atomically, and the directory is
    synced; from then on the old key opens nothing."""
    keys_dir = locations.keys_path()
    upcoming = keys_dir / NEXT_KEY_FILE
    if not upcoming.exists():
        raise NotFound(f"no rotation in progress: there is no {upcoming}")
    os.replace(upcoming, keys_dir / KEY_FILE)
    directory = os.open(keys_dir, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


def rotate_master_key(locations: Locations) -> Rotation:
    """Replace the key file's master key: the next key written (or resumed), every data key
    rewrapped and every knowledge row MACed again under it, then the next key renamed over the
    old. A crash between any two steps leaves every notebook readable and every knowledge row
    authenticated, and running this again finishes the rotation. The knowledge database must
    exist (``not_found`` before anything changes): renaming without re-MACing it would leave
    its rows under a key that is gone."""
    check_rotation(locations)
    locations.prepare(memory=False)
    new = begin_rotation(locations)
    rotation = rewrap_data_keys(locations, new)
    remaced = remac_knowledge(locations, new)
    finish_rotation(locations)
    return replace(rotation, remaced=remaced)


def open_memory_store(locations: Locations, synchronous: Synchronous = "FULL") -> MemoryStore:
    """The memory store, sealing with the configured keyring (``open_keyring``), which it owns:
    closing the store closes the keyring."""
    # The location first: a missing embedded file is refused (not_found) before any key store
    # is opened. The key store is the file in the keys directory, or a database of its own
    # (``Locations.keys_url``), never a PostgreSQL cluster's memory database.
    opened = backend_of(locations.memory_url).memory(locations)
    keyring = open_keyring(locations)
    try:
        _check_keys(locations, keyring)
        return opened(keyring, synchronous)
    except BaseException:
        if keyring is not None:
            keyring.close()
        raise


def _check_keys(locations: Locations, keyring: Keyring | None) -> None:
    """Sealed data with a key store or master key that is not its own is refused before the
    store opens it for writing, so the refusal changes no byte of it (``check_keys_fit``)."""
    if not locations.sealed:
        return
    sealed = sealed_memory(locations)
    if sealed is not None:
        check_keys_fit(keyring, sealed)


def open_knowledge_store(locations: Locations, synchronous: Synchronous = "FULL") -> KnowledgeStore:
    """The knowledge store, writing and checking the MAC of every row under the configured
    master key (``knowledge_macs``) when one is configured."""
    # The location first: a missing embedded file is refused before the key store is looked at.
    opened = backend_of(locations.knowledge_url).knowledge(locations)
    return opened(knowledge_macs(locations), synchronous)


def knowledge_macs(locations: Locations) -> KnowledgeMacs | None:
    """The knowledge MACs under the configured master keys, their marker in the key store;
    None when no master key is configured."""
    keys_dir = locations.keys_path()
    masters = load_master_keys(keys_dir, os.environ)
    if masters is None:
        return None
    return KnowledgeMacs(masters, _KeyStoreMarkers(_existing_key_store(locations)))


@dataclass(frozen=True, slots=True)
class _KeyStoreMarkers:
    """The key store's markers, the file opened for each use: a knowledge store reads them
    when it opens (and writes one once) and never closes them, so they hold no connection."""

    place: KeyStorePlace

    def marker(self, name: str) -> str | None:
        store = self.place.open()
        try:
            return store.marker(name)
        finally:
            store.close()

    def mark(self, name: str, value: str) -> None:
        store = self.place.open()
        try:
            store.mark(name, value)
        finally:
            store.close()


def open_host_registry(locations: Locations) -> HostRegistry:
    """The reference host's registry lives in the knowledge database."""
    return backend_of(locations.knowledge_url).host_registry(locations)


def open_purge_access(locations: Locations) -> PurgeAccess:
    """The purge worker's credential on the memory database."""
    # The purge worker never gets the master key: only the key store credential that destroys
    # the data keys of the notebooks it purges.
    opened = backend_of(locations.memory_url).purge_access(locations)
    shredder = locations.key_store().shredder()
    try:
        return opened(shredder)
    except BaseException:
        if shredder is not None:
            shredder.close()
        raise


def open_recall(
    locations: Locations, embedder: str | None = None, *, clock: Clock = system_clock
) -> Any:
    """The recall service over the memory database (``OH_EMBEDDER`` picks the embedder:
    ``hashing`` by default, ``local``, ``openai``). ``clock`` must be the host's: recall
    answers only for notebooks that are open by it. ``close_recall`` closes it."""
    from oh.recall import Recall, embedder_from_env

    memory = open_memory_store(locations)
    try:
        vectors = open_vector_store(locations)
        try:
            return Recall(
                memory,
                # Recall reads the notes to embed through the memory store's keyring (it owns it).
                vectors,
                embedder_from_env(kind=embedder),
                open_knowledge_store(locations),
                clock=clock,
            )
        except BaseException:
            vectors.close()
            raise
    except BaseException:
        memory.close()
        raise


def open_vector_store(locations: Locations) -> Any:
    """Recall's vector tables in the memory database, on its own connections."""
    return backend_of(locations.memory_url).vectors(locations)


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
    no rows; the default on both backends), ``on``, or ``off`` (no recall tool).
    ``deadline``: seconds one recall may take, ``--recall-deadline`` or ``OH_RECALL_DEADLINE``
    (None: the host default).
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
        chosen = mode or env.get("OH_RECALL") or "shadow"
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
