"""``oh export`` and ``oh import``: the command line over ``oh.transfer``.

An export to a file is written beside it (``FILE.partial``) and renamed at the end, so no half
export ever sits under its name; an import from standard input is copied to a temporary file
first, since it is read twice (checked whole, then imported). Progress goes to standard error.

With a master key configured (docs/keys.md) an export is sealed under it unless ``--plaintext``
is given; without one it is plaintext, and says so. An import reads either form, a sealed one
with the master keys configured here.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import IO, BinaryIO

from oh.cli.options import read_locations
from oh.config import Locations, open_knowledge_store, open_memory_store
from oh.core.canonical import canonical_text
from oh.errors import InvalidArgument, NotFound
from oh.keys import MasterKeys, load_master_keys
from oh.storage.base import KnowledgeStore, MemoryStore
from oh.transfer import (
    Progress,
    export_contents,
    export_knowledge,
    export_notebooks,
    import_export,
)

__all__ = ["cmd_export", "cmd_import", "configure_export", "configure_import"]


def configure_export(parser: argparse.ArgumentParser) -> None:
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--notebook",
        action="append",
        metavar="ID",
        help="export this notebook (repeat for several)",
    )
    what.add_argument("--notebooks", action="store_true", help="export every notebook")
    what.add_argument("--knowledge", action="store_true", help="export the whole knowledge base")
    parser.add_argument(
        "--out", metavar="FILE", help="write to FILE (default: standard output)", default="-"
    )
    parser.add_argument(
        "--plaintext",
        action="store_true",
        help="write plain JSON lines even when a master key is configured (default: sealed"
        " under it)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")


def configure_import(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="an export file, or - for standard input")
    parser.add_argument(
        "--skip-existing",
        action="store_true",
        help="skip notebooks and owners that already exist instead of stopping",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress on standard error")


def _stderr_progress(quiet: bool) -> Progress:
    def show(message: str) -> None:
        if not quiet:
            print(message, file=sys.stderr, flush=True)

    return show


def _master_keys(locations: Locations) -> MasterKeys | None:
    return load_master_keys(locations.keys_path(), os.environ)


def cmd_export(args: argparse.Namespace) -> int:
    """``oh export``: notebooks or the knowledge base as canonical JSON lines, sealed under the
    master key when one is configured and ``--plaintext`` is not given."""
    progress = _stderr_progress(args.quiet)
    locations = read_locations(args)
    plaintext = getattr(args, "plaintext", False)
    seal = None if plaintext else _master_keys(locations)
    out: IO[bytes]
    target = Path(args.out) if args.out != "-" else None
    partial = None
    if target is None:
        out = sys.stdout.buffer
    else:
        # Written beside the target and renamed at the end: no half export under its name.
        partial = target.with_name(target.name + ".partial")
        try:
            out = partial.open("wb")
        except OSError as exc:  # a missing directory, no permission: one line, no traceback
            raise InvalidArgument(f"cannot write {target}: {exc.strerror}") from None
    try:
        if args.knowledge:
            knowledge = open_knowledge_store(locations)
            try:
                report = export_knowledge(knowledge, out, progress, seal=seal)
            finally:
                knowledge.close()
        else:
            memory = open_memory_store(locations)
            try:
                report = export_notebooks(
                    memory, out, None if args.notebooks else args.notebook, progress, seal=seal
                )
            finally:
                memory.close()
    except BaseException:
        if partial is not None:
            out.close()
            partial.unlink(missing_ok=True)
        raise
    if partial is not None and target is not None:
        out.close()
        partial.replace(target)
    if seal is None and not plaintext:  # said once it is written: a failure prints one line
        print(
            "oh export: no master key is configured, so the export is plaintext: whoever can"
            " read it reads every note in it (docs/keys.md)",
            file=sys.stderr,
            flush=True,
        )
    for notebook_id in report.forgotten:
        print(
            f"oh export: {notebook_id}: purged: no data key (forgotten); not exported",
            file=sys.stderr,
            flush=True,
        )
    progress(canonical_text(report.to_json()))
    return 0


def _read_file(path: Path) -> BinaryIO:
    try:
        return path.open("rb")
    except FileNotFoundError:
        raise NotFound(f"no export file at {path}") from None
    except OSError as exc:  # a directory, no permission: one line, no traceback
        raise InvalidArgument(f"cannot read {path}: {exc.strerror}") from None


def cmd_import(args: argparse.Namespace) -> int:
    """``oh import FILE``: check a whole export, plaintext or sealed, then import it."""
    progress = _stderr_progress(args.quiet)
    locations = read_locations(args)
    masters = _master_keys(locations)
    with tempfile.TemporaryFile() if args.file == "-" else _read_file(Path(args.file)) as source:
        if args.file == "-":
            shutil.copyfileobj(sys.stdin.buffer, source)  # it is read twice: keep a copy
        what = export_contents(source, masters)
        store: MemoryStore | KnowledgeStore
        if what == "knowledge":
            store = open_knowledge_store(locations)
            try:
                report = import_export(
                    source,
                    knowledge=store,
                    skip_existing=args.skip_existing,
                    progress=progress,
                    masters=masters,
                )
            finally:
                store.close()
        else:
            store = open_memory_store(locations)
            try:
                report = import_export(
                    source,
                    memory=store,
                    skip_existing=args.skip_existing,
                    progress=progress,
                    masters=masters,
                )
            finally:
                store.close()
    print(canonical_text(report.to_json()))
    return 0
