"""``oh profile preview|install|list``: the command line over ``oh.profiles.Profiles``.

``register(subparsers, common)`` adds the ``profile`` command to the ``oh`` parser; each action
sets ``handler`` (returning the exit status) like every other command. PACK is a pack file's
path or the name of a shipped pack (``research``, ``language``, ``finance``).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from oh.cli.options import read_locations
from oh.config import Locations, open_knowledge_store, open_memory_store
from oh.profiles.installs import InstalledPack, Preview, Profiles, plan
from oh.profiles.packs import SHIPPED_PACKS, find_pack
from oh.storage.base import MemoryStore

__all__ = ["SUMMARY", "cmd_install", "cmd_list", "cmd_preview", "register"]

SUMMARY = "preview, install and list the profile packs of an owner's knowledge base"


def _profiles(args: argparse.Namespace) -> Profiles:
    return Profiles(open_knowledge_store(read_locations(args)))


def _memory(args: argparse.Namespace) -> MemoryStore:
    """The memory database, whose notes preview and install check against the new kinds."""
    return open_memory_store(
        Locations.resolve(
            args.data, args.memory_url, args.knowledge_url, keys_dir=getattr(args, "keys", None)
        )
    )


def _print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, ensure_ascii=False))


def _say(line: str = "") -> None:
    print(line)


def _describe(preview: Preview, owner: str | None) -> None:
    pack = preview.pack
    _say(f"{pack.name} {pack.version} (format {pack.format}, digest {pack.digest[:16]}…)")
    where = f"{owner}'s knowledge base" if owner else "an empty knowledge base"
    if preview.installed is None:
        _say(f"action: install into {where}")
    else:
        was = preview.installed
        _say(
            f"action: {preview.action} in {where}"
            f" (installed: {was.pack.version} at revision {was.revision})"
        )
    if preview.action == "none":
        _say("nothing would change: this exact pack is installed")
        return
    for change in preview.changes:
        mark = "+" if change.change == "kind_added" else ("~" if change.compatible else "!")
        if change.change == "kind_added":
            kind = pack.kinds[change.kind]
            fields = ", ".join(
                name + ("*" if field.required else "") for name, field in kind.fields.items()
            )
            _say(f"  {mark} kind {change.kind}: {fields}")
        else:
            _say(f"  {mark} {change.detail}")
    for conflict in preview.conflicts:
        _say(f"  conflict: {conflict}")
    if preview.records_checked:
        _say(
            f"reviewed records of its kinds: {preview.records_checked} checked,"
            f" {len(preview.records_invalid)} would not fit"
        )
        for name, reason in preview.records_invalid[:20]:
            _say(f"  {name}: {reason}")
    _left_invalid(preview)
    if not preview.can_install:
        _say("verdict: cannot be installed (conflicts with installed packs)")
    elif preview.needs_force:
        _say("verdict: needs --force: " + "; ".join(preview.incompatible))
    else:
        _say("verdict: can be installed")


def _left_invalid(preview: Preview) -> None:
    """The pending proposals and notes the install would leave unreviewable: a warning, since
    they do not stop the install."""
    if preview.proposals_invalid:
        _say(
            f"pending proposals that could no longer be accepted as proposed:"
            f" {len(preview.proposals_invalid)} (reject them, or accept with edits that fit)"
        )
        for item in preview.proposals_invalid[:20]:
            _say(f"  {item.where} {item.name}: {item.reason}")
    if preview.notes_invalid:
        _say(
            f"current notes that could no longer be proposed for review:"
            f" {len(preview.notes_invalid)}"
        )
        for item in preview.notes_invalid[:20]:
            _say(f"  {item.where} {item.name}: {item.reason}")


def cmd_preview(args: argparse.Namespace) -> int:
    """Exit status 0 when the pack installs as it is (or is installed already), 1 when it
    would need ``--force`` or conflicts with an installed pack."""
    pack = find_pack(args.pack)
    if args.owner is None:
        preview = plan(pack, [])
    else:
        profiles = _profiles(args)
        try:
            memory = _memory(args)
            try:
                preview = profiles.preview(args.owner, pack, memory=memory)
            finally:
                memory.close()
        finally:
            profiles.store.close()
    if args.json:
        _print_json(preview.to_json())
    else:
        _describe(preview, args.owner)
    return 0 if preview.can_install and not preview.needs_force else 1


def cmd_install(args: argparse.Namespace) -> int:
    pack = find_pack(args.pack)
    profiles = _profiles(args)
    try:
        memory = _memory(args)
        try:
            result = profiles.install(args.owner, pack, force=args.force, memory=memory)
        finally:
            memory.close()
    finally:
        profiles.store.close()
    if args.json:
        _print_json(result.to_json())
    elif result.changed:
        _say(
            f"installed {pack.name} {pack.version} for {args.owner}"
            f" at revision {result.installed.revision}"
        )
        _left_invalid(result.preview)
    else:
        _say(
            f"{pack.name} {pack.version} is installed for {args.owner} already"
            f" (revision {result.installed.revision}); nothing changed"
        )
    return 0


def _row(item: InstalledPack) -> str:
    return (
        f"{item.pack.name:<12} {item.pack.version!s:<10} revision {item.revision:<6}"
        f" {item.installed_at}  kinds: {', '.join(sorted(item.pack.kinds))}"
    )


def cmd_list(args: argparse.Namespace) -> int:
    profiles = _profiles(args)
    try:
        installed = profiles.installed(args.owner)
    finally:
        profiles.store.close()
    if args.json:
        _print_json({"owner": args.owner, "packs": [item.to_json() for item in installed]})
    elif not installed:
        _say(f"no packs installed for {args.owner}")
    else:
        for item in installed:
            _say(_row(item))
    return 0


def register(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
    common: argparse.ArgumentParser,
) -> argparse.ArgumentParser:
    """Add ``oh profile`` with its actions to ``subparsers``; ``common`` carries ``--data``,
    ``--memory-url`` and ``--knowledge-url``. Returns the ``profile`` parser."""
    profile = subparsers.add_parser("profile", help=SUMMARY, description=SUMMARY)
    actions = profile.add_subparsers(dest="profile_action", required=True, metavar="ACTION")
    pack_help = f"a pack file, or a shipped pack: {', '.join(SHIPPED_PACKS)}"

    preview = actions.add_parser(
        "preview",
        parents=[common],
        help="show what installing a pack would add or change, changing nothing",
        description="Show what installing PACK would add or change, changing nothing.",
    )
    preview.add_argument("pack", metavar="PACK", help=pack_help)
    preview.add_argument(
        "--owner",
        metavar="NAME",
        help="compare with NAME's installed packs, reviewed records, proposals and notes",
    )
    preview.add_argument("--json", action="store_true", help="print the preview as JSON")
    preview.set_defaults(handler=cmd_preview)

    install = actions.add_parser(
        "install",
        parents=[common],
        help="install a pack into an owner's knowledge base as a new revision",
        description="Install PACK into NAME's knowledge base as a new revision.",
    )
    install.add_argument("pack", metavar="PACK", help=pack_help)
    install.add_argument("--owner", metavar="NAME", required=True, help="the owner")
    install.add_argument(
        "--force",
        action="store_true",
        help="install even if incompatible (a downgrade, removed kinds or fields, ...)",
    )
    install.add_argument("--json", action="store_true", help="print the result as JSON")
    install.set_defaults(handler=cmd_install)

    listing = actions.add_parser(
        "list",
        parents=[common],
        help="list the packs installed for an owner",
        description="List the packs installed in NAME's knowledge base.",
    )
    listing.add_argument("--owner", metavar="NAME", required=True, help="the owner")
    listing.add_argument("--json", action="store_true", help="print the list as JSON")
    listing.set_defaults(handler=cmd_list)
    actions.metavar = "{" + ",".join(actions.choices) + "}"  # a missing action names them
    return profile
