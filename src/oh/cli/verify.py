"""``oh verify``: replay every log, check every hash chain and digest, compare every derived
copy (current tables, kept answers, similarity vectors) with what the logs say.

Exit status 0 when everything checks out, 1 when anything does not.
"""

from __future__ import annotations

import argparse
import json
import sys

from oh.cli.options import read_locations
from oh.config import open_knowledge_store, open_memory_store
from oh.verify import verify_knowledge, verify_reviewed_vectors, verify_store

__all__ = ["cmd_verify", "configure_verify"]


def configure_verify(command: argparse.ArgumentParser) -> None:
    command.add_argument("--json", action="store_true", help="print the report as JSON")


def cmd_verify(args: argparse.Namespace) -> int:
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
        report = verify_store(store, progress, knowledge=knowledge)
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
        for problem in report.problems + knowledge_report.problems:
            print(f"{problem.notebook_id}: {problem.what}: {problem.detail}")
        verdict = "OK" if ok else "FAILED"
        print(
            f"verify: {report.notebooks} notebooks, {report.entries} log entries, "
            f"{report.records} records; {knowledge_report.entries} knowledge revisions, "
            f"{knowledge_report.records} reviewed versions: {verdict}"
        )
    return 0 if ok else 1
