"""The ``oh`` command: a thin layer over the library. Every command is documented in
``docs/cli.md`` (a test checks it)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from oh import __version__
from oh.config import Locations, is_postgres_url, open_knowledge_store, open_memory_store
from oh.errors import OhError
from oh.profiles.cli import register as register_profile
from oh.verify import verify_knowledge, verify_reviewed_vectors, verify_store

__all__ = ["COMMANDS", "build_parser", "main"]


def _locations(args: argparse.Namespace) -> Locations:
    return Locations.resolve(args.data, args.memory_url, args.knowledge_url)


def cmd_verify(args: argparse.Namespace) -> int:
    locations = _locations(args)
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


def parse_every(text: str) -> float:
    """``300``, ``300s``, ``5m``, ``1h`` → seconds."""
    units = {"s": 1, "m": 60, "h": 3600}
    number, unit = (text[:-1], text[-1]) if text and text[-1] in units else (text, "s")
    try:
        seconds = float(number) * units[unit]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a duration: {text!r} (try 30, 30s, 5m, 1h)"
        ) from None
    if not seconds > 0:
        raise argparse.ArgumentTypeError("the interval must be positive")
    return seconds


def cmd_purge(args: argparse.Namespace) -> int:
    from oh.config import open_purge_access
    from oh.notebooks import purge_expired

    access = open_purge_access(_locations(args))
    stop = threading.Event()

    def request_stop(signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)
    grace = timedelta(seconds=args.opening_grace)
    try:
        while True:
            try:
                report = purge_expired(access, datetime.now(UTC), opening_grace=grace)
                print(json.dumps(report.to_json()), flush=True)
            except OhError as exc:
                if args.every is None:
                    raise
                # A scheduled worker outlives a passing fault; it says so and tries again.
                print(json.dumps({"event": "purge_failed", **exc.to_json()}), flush=True)
            if args.every is None or stop.wait(args.every):
                break
    finally:
        access.close()
    if args.every is not None:
        print(json.dumps({"event": "purge_stopped"}), flush=True)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from oh.host import HostSettings, open_host
    from oh.http import create_app
    from oh.mcp import mcp_app

    locations = _locations(args)
    base = f"http://{args.host}:{args.port}"
    mode = args.recall
    if mode is None:  # shadow on the embedded default; vectors live only there in this release
        mode = "off" if is_postgres_url(locations.memory_url) else "shadow"
    recall = None
    if mode != "off":
        from oh.config import open_recall

        recall = open_recall(locations)
    settings = HostSettings(public_url=base, recall_shadow=mode != "on")
    host = open_host(locations, settings=settings, recall=recall)
    if recall is not None:
        _catch_up_in_background(recall)
    app = create_app(host, mcp=mcp_app(host))
    where = locations.memory_url or locations.data_dir
    print(f"Oh {__version__} serving memory from {where}", flush=True)
    print(f"  HTTP API   {base}/v1  (OpenAPI: {base}/openapi.json)", flush=True)
    print(f"  MCP        {base}/mcp  (agent token from opening a notebook)", flush=True)
    print(f"  Panel      {base}/panel/notebooks/<id>", flush=True)
    print(f"  Owner token: oh token create --owner NAME --data {locations.data_dir}", flush=True)
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _catch_up_in_background(recall: Any, every: float = 1.0) -> None:
    """Embed pending notes outside every write (SPEC §7), in a daemon thread."""
    import logging

    log = logging.getLogger("oh.recall")

    def loop() -> None:
        while True:
            try:
                recall.catch_up_all()
            except Exception:  # a passing embedder fault must not stop the loop
                log.exception("recall catch-up failed; retrying")
            time.sleep(every)

    threading.Thread(target=loop, name="oh-recall-catch-up", daemon=True).start()


def cmd_index(args: argparse.Namespace) -> int:
    from oh.recall.cli import rebuild_command

    return int(rebuild_command(args))


def cmd_token(args: argparse.Namespace) -> int:
    from oh.host import open_host

    if args.action != "create":
        raise SystemExit("oh token: the only action is create")
    host = open_host(_locations(args))
    token = host.create_owner_token(args.owner)
    print(f"owner token for {args.owner} (shown once; only its hash is stored):")
    print(token)
    return 0


def cmd_mcp(args: argparse.Namespace) -> int:
    from oh.mcp import cmd_mcp as run_mcp

    return int(run_mcp(args))


def cmd_export(args: argparse.Namespace) -> int:
    from oh.transfer import cmd_export as run

    return int(run(args))


def cmd_import(args: argparse.Namespace) -> int:
    from oh.transfer import cmd_import as run

    return int(run(args))


def cmd_postgres(args: argparse.Namespace) -> int:
    from oh.storage.postgres import roles_sql

    print(roles_sql(schema=args.schema, app_role=args.app_role, purge_role=args.purge_role), end="")
    return 0


def cmd_schemas(args: argparse.Namespace) -> int:
    from oh.schemas import ARGUMENTS, RESULTS, TOOL_CONTRACT_VERSION

    print(
        json.dumps(
            {
                "tool_contract_version": TOOL_CONTRACT_VERSION,
                "arguments": ARGUMENTS,
                "results": RESULTS,
            },
            indent=2,
            sort_keys=True,
        )
    )
    return 0


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
    "serve": ("run the reference host: HTTP API, MCP endpoint and Memory panel", cmd_serve),
    "mcp": ("serve one notebook's tools over MCP stdio (agent token from OH_AGENT_TOKEN)", cmd_mcp),
    "index": ("drop and rebuild every similarity vector: oh index rebuild", cmd_index),
    "token": ("create an owner token: oh token create --owner NAME", cmd_token),
    "export": ("write notebooks or the knowledge base as canonical JSON lines", cmd_export),
    "import": ("import an export, checked whole before anything is written", cmd_import),
    "postgres": (
        "print the SQL that creates the PostgreSQL roles: oh postgres roles",
        cmd_postgres,
    ),
    "schemas": ("print the JSON Schemas of every tool's arguments and results", cmd_schemas),
    "purge": ("delete expired notebooks once, or on a schedule with --every", cmd_purge),
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
    register_profile(sub, common)
    for name, (summary, handler) in COMMANDS.items():
        command = sub.add_parser(name, parents=[common], help=summary, description=summary)
        command.set_defaults(handler=handler)
        if name == "verify":
            command.add_argument("--json", action="store_true", help="print the report as JSON")
        if name == "index":
            from oh.recall.cli import add_rebuild_arguments

            command.add_argument("action", choices=["rebuild"])
            add_rebuild_arguments(command)
        if name == "serve":
            command.add_argument(
                "--recall",
                choices=["off", "shadow", "on"],
                default=None,
                help="the recall tool: shadow (computed and measured, the agent gets no rows;"
                " the default on the embedded backend), on, or off (no recall tool; the"
                " default on PostgreSQL)",
            )
            command.add_argument("--host", default="127.0.0.1", help="address (127.0.0.1)")
            command.add_argument("--port", type=int, default=8765, help="port (8765)")
            command.add_argument("--log-level", default="warning", help="uvicorn log level")
        if name == "mcp":
            command.add_argument("--notebook", required=True, metavar="ID")
        if name == "export":
            from oh.transfer import configure_export

            configure_export(command)
        if name == "import":
            from oh.transfer import configure_import

            configure_import(command)
        if name == "postgres":
            command.add_argument("action", choices=["roles"])
            command.add_argument("--schema", default="oh")
            command.add_argument("--app-role", default="oh_app")
            command.add_argument("--purge-role", default="oh_purge")
        if name == "token":
            command.add_argument("action", choices=["create"])
            command.add_argument("--owner", required=True, metavar="NAME")
        if name == "purge":
            command.add_argument(
                "--every",
                type=parse_every,
                metavar="SECONDS",
                help="run a pass every SECONDS (or 30s, 5m, 1h) until SIGTERM/SIGINT",
            )
            command.add_argument(
                "--opening-grace",
                type=float,
                default=600.0,
                metavar="SECONDS",
                help="mark empty a notebook still opening after this long (default 600)",
            )
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
    except BrokenPipeError:  # e.g. `oh demo | head`
        return 141


if __name__ == "__main__":
    raise SystemExit(main())
