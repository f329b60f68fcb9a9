"""``oh key create|rotate|status``: the command line over the master key (docs/keys.md).

``register(subparsers, common)`` adds the ``key`` command to the ``oh`` parser; each action sets
``handler`` like every other command. The work is ``oh.config``'s (``create_master_key``,
``rotate_master_key``, ``key_status``); this module reads the flags and prints. Nothing here
prints key material except ``oh key create --stdout``, whose whole point is to.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from oh.cli.options import read_locations
from oh.config import create_master_key, key_status, rotate_master_key
from oh.keys import KEY_FILE, MASTER_KEY_ENV, losing_it

__all__ = ["SUMMARY", "cmd_create", "cmd_rotate", "cmd_status", "register", "warn_created"]

SUMMARY = "create, rotate and show the master key that seals notebooks: oh key status"


def warn_created(command: str, key_file: Path) -> None:
    """What ``oh serve`` and ``oh token create`` print once, when they created the key."""
    where = key_file.resolve()
    print(f"oh {command}: created the master key {where}", file=sys.stderr)
    print(f"oh {command}: {losing_it(f'the master key file {where}')}", file=sys.stderr)
    sys.stderr.flush()


def cmd_create(args: argparse.Namespace) -> int:
    locations = read_locations(args)
    if args.stdout:
        key = create_master_key(locations, write=False)
        print(key.text(), flush=True)
        print(
            f"oh key create: master key {key.id}, not written anywhere: keep it in your secret"
            f" manager and give it to every Oh process as {MASTER_KEY_ENV}.",
            file=sys.stderr,
        )
        print(f"oh key create: {losing_it('the key printed above')}", file=sys.stderr)
        return 0
    key = create_master_key(locations)
    keys_dir = locations.keys_path().resolve()
    print(f"master key {key.id} written to {keys_dir / KEY_FILE} (mode 0600)")
    print(f"key store {locations.key_store().where}")
    print(
        f"oh key create: {losing_it(f'the master key file {keys_dir / KEY_FILE}')}", file=sys.stderr
    )
    return 0


def cmd_rotate(args: argparse.Namespace) -> int:
    rotation = rotate_master_key(read_locations(args))
    print(f"master key rotated: {rotation.old_id} -> {rotation.new_id}")
    print(f"data keys rewrapped: {rotation.rewrapped}")
    print(f"knowledge rows MACed again: {rotation.remaced}")
    print(f"key file {rotation.key_file}")
    print(
        f"oh key rotate: the old key {rotation.old_id} opens nothing any more:"
        f" {losing_it(f'the new master key file {rotation.key_file}')}",
        file=sys.stderr,
    )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    """Exit status 1 when the key store holds data keys no configured master key opens."""
    status = key_status(read_locations(args))
    if args.json:
        print(json.dumps(status.to_json(), indent=2))
        return 1 if status.unreadable_data_keys else 0
    if status.master_key_id is None:
        print("master key: none configured (oh serve or oh key create makes one)")
    elif status.source == "environment":
        print(f"master key: {status.master_key_id} (from {MASTER_KEY_ENV})")
    else:
        print(f"master key: {status.master_key_id} (file {status.key_file})")
    state = "" if status.key_store_exists else " (not created yet)"
    shared = " (shared by every server)" if status.key_store_shared else ""
    print(f"key store: {status.key_store}{shared}{state}")
    if status.data_keys:
        for key_id, count in sorted(status.data_keys.items()):
            print(f"data keys under {key_id}: {count}")
    else:
        print("data keys: none")
    if status.unreadable_data_keys:
        print(
            f"unreadable: {status.unreadable_data_keys} data keys are wrapped by a master key"
            " that is not configured (docs/keys.md, Losing the master key)"
        )
    if status.rotation_in_progress:
        print(f"rotation in progress to {status.next_key_id}: run oh key rotate to finish it")
    for warning in status.warnings:
        print(f"warning: {warning}")
    return 1 if status.unreadable_data_keys else 0


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> argparse.ArgumentParser:
    """Add ``oh key`` with its actions to ``subparsers``; ``common`` carries the location
    flags (``--keys`` among them). Returns the ``key`` parser."""
    key = subparsers.add_parser("key", help=SUMMARY, description=SUMMARY)
    actions = key.add_subparsers(dest="key_action", required=True, metavar="ACTION")

    create = actions.add_parser(
        "create",
        parents=[common],
        help="make a new master key in the keys directory (never replacing one)",
        description="Make a new master key in the keys directory, and the key store.",
    )
    create.add_argument(
        "--stdout",
        action="store_true",
        help=f"print the key's text (for {MASTER_KEY_ENV}) instead of writing the key file",
    )
    create.set_defaults(handler=cmd_create)

    rotate = actions.add_parser(
        "rotate",
        parents=[common],
        help="replace the key file's master key, rewrapping every data key",
        description="Replace the key file's master key, rewrapping every data key under the"
        " new one; resumes a rotation that did not finish.",
    )
    rotate.set_defaults(handler=cmd_rotate)

    status = actions.add_parser(
        "status",
        parents=[common],
        help="show the master key's id and source, the key store and its data keys",
        description="Show the master key's id and where it comes from, the key store, its"
        " data keys per master key and any rotation in progress (never key material).",
    )
    status.add_argument("--json", action="store_true", help="print one JSON object")
    status.set_defaults(handler=cmd_status)
    actions.metavar = "{" + ",".join(actions.choices) + "}"  # a missing action names them
    return key
