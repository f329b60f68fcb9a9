"""Master key rotation (docs/keys.md), step by step, each step safe to run again after a crash
(``oh.config``)."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

from oh.config.locations import Locations
from oh.config.stores import open_knowledge_store
from oh.errors import InvalidArgument, NotFound
from oh.keys import (
    KEY_FILE,
    MASTER_KEY_ENV,
    NEXT_KEY_FILE,
    Keyring,
    MasterKey,
    MasterKeys,
    load_master_keys,
    read_master_key,
    write_master_key,
)
from oh.keys.macs import AuthenticatedKnowledge, Remaced, remac

__all__ = [
    "Rotation",
    "begin_rotation",
    "check_rotation",
    "finish_rotation",
    "remac_knowledge",
    "rewrap_data_keys",
    "rotate_master_key",
]


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
