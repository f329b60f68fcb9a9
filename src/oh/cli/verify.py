"""``oh verify``: replay every log, check every hash chain and digest, compare every derived
copy (current tables, kept answers, similarity vectors) with what the logs say.

Exit status 0 when everything checks out, 1 when anything does not. ``--jobs N`` shares the
notebooks among N processes, this one and N - 1 workers (default: the cores this process may
use), each worker opening its own read connections to the same databases; the report is the
same as with ``--jobs 1``.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys

from oh.cli.options import MAX_PROCESSES, process_count, read_locations
from oh.config import Locations, open_knowledge_store, open_memory_store
from oh.errors import InvalidArgument
from oh.storage.base import KnowledgeSource, MemoryStore
from oh.verify import SPREAD_FROM_ENTRIES, verify_knowledge, verify_reviewed_vectors, verify_store

__all__ = ["MAX_JOBS", "cmd_verify", "configure_verify", "default_jobs", "parse_jobs"]

MAX_JOBS = MAX_PROCESSES


def configure_verify(command: argparse.ArgumentParser) -> None:
    command.add_argument("--json", action="store_true", help="print the report as JSON")
    command.add_argument(
        "--jobs",
        metavar="N",
        help=(
            "processes sharing the notebooks, this one included; 1 verifies in this process"
            " alone (default: the cores this process may use; data with one notebook or fewer"
            f" than {SPREAD_FROM_ENTRIES:,} log entries is verified in this process alone)"
        ),
    )


def default_jobs() -> int:
    """The cores this process may run on (its affinity, not the machine's count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def parse_jobs(text: str | None) -> int:
    """``--jobs``: ``process_count``; unset is the default."""
    if text is None:
        return default_jobs()
    try:
        return process_count(text)
    except ValueError as exc:
        raise InvalidArgument(
            f"--jobs must be a whole number of processes from 1 to {MAX_JOBS} ({exc})"
        ) from None


def _reopen(locations: Locations) -> tuple[MemoryStore, KnowledgeSource | None]:
    """A worker's own connections to the databases the command opened (run in the worker)."""
    store = open_memory_store(locations)
    try:
        return store, open_knowledge_store(locations)
    except BaseException:
        store.close()
        raise


def cmd_verify(args: argparse.Namespace) -> int:
    jobs = parse_jobs(getattr(args, "jobs", None))  # refused before anything is opened
    locations = read_locations(args)
    locations.prepare()
    store = open_memory_store(locations)
    try:
        knowledge = open_knowledge_store(locations)
    except BaseException:
        store.close()
        raise
    try:

        def progress(done: int, total: int) -> None:
            if not args.json and sys.stderr.isatty():
                print(f"\rverifying notebooks {done}/{total}", end="", file=sys.stderr)

        # Kept answers at a pinned revision are recomputed with the knowledge base they pin.
        report = verify_store(
            store,
            progress,
            knowledge=knowledge,
            jobs=jobs,
            reopen=functools.partial(_reopen, locations),
        )
        knowledge_report = verify_knowledge(knowledge)
        verify_reviewed_vectors(store, knowledge, knowledge_report)
    finally:
        store.close()
        knowledge.close()
    ok = report.ok and knowledge_report.ok
    if args.json:
        print(
            json.dumps(
                {"ok": ok, "memory": report.to_json(), "knowledge": knowledge_report.to_json()},
                indent=2,
            )
        )
    else:
        if sys.stderr.isatty():
            print(file=sys.stderr)
        for notebook_id in report.forgotten:
            print(f"{notebook_id}: purged: no data key (forgotten); its rows cannot be read")
        for problem in report.problems + knowledge_report.problems:
            print(f"{problem.notebook_id}: {problem.what}: {problem.detail}")
        verdict = "OK" if ok else "FAILED"
        print(
            f"verify: {report.notebooks} notebooks, {report.entries} log entries, "
            f"{report.records} records; {knowledge_report.entries} knowledge revisions, "
            f"{knowledge_report.records} reviewed versions"
            + (f"; {len(report.forgotten)} forgotten" if report.forgotten else "")
            + f": {verdict}"
        )
    return 0 if ok else 1
