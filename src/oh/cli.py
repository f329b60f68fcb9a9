"""The ``oh`` command: a thin layer over the library. Every command is documented in
``docs/cli.md`` (a test checks it)."""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from oh import __version__
from oh.config import Locations, open_memory_store
from oh.errors import OhError
from oh.verify import verify_store

__all__ = ["COMMANDS", "build_parser", "main"]


def _locations(args: argparse.Namespace) -> Locations:
    return Locations.resolve(args.data, args.memory_url, args.knowledge_url)


def cmd_verify(args: argparse.Namespace) -> int:
    store = open_memory_store(_locations(args))
    try:

        def progress(done: int, total: int) -> None:
            if not args.json and sys.stderr.isatty():
                print(f"\rverifying notebooks {done}/{total}", end="", file=sys.stderr)

        report = verify_store(store, progress)
    finally:
        store.close()
    if args.json:
        print(json.dumps(report.to_json(), indent=2))
    else:
        if sys.stderr.isatty():
            print(file=sys.stderr)
        for problem in report.problems:
            print(f"{problem.notebook_id}: {problem.what}: {problem.detail}")
        verdict = "OK" if report.ok else f"FAILED ({len(report.problems)} problems)"
        print(
            f"verify: {report.notebooks} notebooks, {report.entries} log entries, "
            f"{report.records} records: {verdict}"
        )
    return 0 if report.ok else 1


def cmd_demo(args: argparse.Namespace) -> int:
    from oh.demo import run_demo

    if args.data:
        return 0 if run_demo(Path(args.data)) else 1
    with tempfile.TemporaryDirectory(prefix="oh-demo-") as tmp:
        return 0 if run_demo(Path(tmp)) else 1


COMMANDS: dict[str, tuple[str, Callable[[argparse.Namespace], int]]] = {
    "verify": (
        "replay every log, check hash chains and digests, compare derived tables",
        cmd_verify,
    ),
    "demo": ("walk through the reef-recovery example against a fresh embedded store", cmd_demo),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="oh", description="Working memory for AI agents.")
    parser.add_argument("--version", action="version", version=f"oh {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data", metavar="DIR", help="data directory (env OH_DATA, ./oh-data)")
    common.add_argument("--memory-url", metavar="URL", help="memory database (env OH_MEMORY_URL)")
    common.add_argument(
        "--knowledge-url", metavar="URL", help="knowledge database (env OH_KNOWLEDGE_URL)"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (summary, handler) in COMMANDS.items():
        command = sub.add_parser(name, parents=[common], help=summary, description=summary)
        command.set_defaults(handler=handler)
        if name == "verify":
            command.add_argument("--json", action="store_true", help="print the report as JSON")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except OhError as exc:
        print(f"oh {args.command}: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
