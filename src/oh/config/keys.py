"""The keys a configuration opens (docs/keys.md): the keyring of the configured master key,
the first master key of a data directory, the knowledge MACs, and what ``oh key status``
reports (``oh.config``)."""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oh.config.locations import UNSEALED_ENV, Locations
from oh.errors import AlreadyExists, InvalidArgument, NotFound, StorageUnavailable
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
from oh.keys.macs import KnowledgeMacs
from oh.keys.sealing import LOST_KEYS_FIX, check_keys_fit
from oh.storage.backends import backend_of
from oh.storage.key_stores import KeyStorePlace

__all__ = [
    "KeyStatus",
    "UnsealedWarning",
    "create_master_key",
    "key_status",
    "knowledge_macs",
    "open_keyring",
    "sealed_memory",
    "start_master_key",
]


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
    from oh.storage.postgres.keys import cluster_id

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


def _check_keys(locations: Locations, keyring: Keyring | None) -> None:
    """Sealed data with a key store or master key that is not its own is refused before the
    store opens it for writing, so the refusal changes no byte of it (``check_keys_fit``)."""
    if not locations.sealed:
        return
    sealed = sealed_memory(locations)
    if sealed is not None:
        check_keys_fit(keyring, sealed)


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
