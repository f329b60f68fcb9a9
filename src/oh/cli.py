"""The ``oh`` command: a thin layer over the library. Every command is documented in
``docs/cli.md`` (a test checks it)."""

from __future__ import annotations

import argparse
import errno
import json
import os
import shlex
import shutil
import signal
import socket
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from oh import __version__
from oh.config import Locations, is_postgres_url, open_knowledge_store, open_memory_store
from oh.errors import OhError
from oh.profiles.cli import register as register_profile
from oh.storage.base import OPENING_GRACE_FLOOR
from oh.verify import verify_knowledge, verify_reviewed_vectors, verify_store

__all__ = ["COMMANDS", "build_parser", "main"]


def _locations(args: argparse.Namespace) -> Locations:
    return Locations.from_args(args)


def cmd_verify(args: argparse.Namespace) -> int:
    locations = _locations(args)
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


def parse_grace(text: str) -> float:
    """``--opening-grace`` in seconds, no shorter than the floor the database enforces."""
    floor = OPENING_GRACE_FLOOR.total_seconds()
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not seconds >= floor:
        raise argparse.ArgumentTypeError(
            f"at least {floor:.0f}: the database never lets the purge end a younger opening"
        )
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
    locations = Locations.from_args(args, create=True)
    # Bound before anything is opened (or the server's modules even imported): a taken port
    # stops here at once and creates nothing, and the banner can name the port actually
    # bound (--port 0 lets the system choose).
    listener = _listen(args.host, args.port)
    try:
        import uvicorn

        from oh.config import RecallConfig
        from oh.host import close_host, open_agent_host
        from oh.http import create_app
        from oh.mcp import mcp_app

        port = int(listener.getsockname()[1])
        shown_host = f"[{args.host}]" if ":" in args.host else args.host
        base = f"http://{shown_host}:{port}"
        recall = RecallConfig.resolve(locations, args.recall, args.recall_deadline)
        host = open_agent_host(
            locations, recall, public_url=base, owner_token_command=owner_token_command(locations)
        )
        try:
            app = create_app(host, mcp=mcp_app(host))
            banner = _banner(locations, base)

            class Server(uvicorn.Server):
                async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                    await super().startup(sockets)
                    # Only now is the socket accepting: a client that reads "serving" and
                    # connects at once is answered.
                    if self.started:
                        print("\n".join(banner), flush=True)

            config = uvicorn.Config(app, log_level=args.log_level)
            Server(config).run(sockets=[listener])
        finally:
            close_host(host)  # uvicorn has stopped serving: end the background work
    finally:
        listener.close()
    return 0


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``, or one clear line and exit status 1."""
    listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    # As uvicorn does: a restart may rebind at once; a live listener still holds the port.
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((host, port))
        listener.listen(2048)
    except OSError as exc:
        listener.close()
        if exc.errno == errno.EADDRINUSE:
            reason = f"port {port} on {host} is already in use; pass --port to choose another"
        else:
            reason = f"cannot listen on {host} port {port}: {exc.strerror or exc}"
        raise SystemExit(f"oh serve: {reason}") from None
    return listener


def _banner(locations: Locations, base: str) -> list[str]:
    """What ``oh serve`` prints once it accepts connections. The owner-token command is
    printed so that it works as written from any directory: the ``oh`` that is running
    (its absolute path unless ``oh`` on PATH is this one) and absolute database locations."""
    where = (
        str(locations.data_dir.resolve())
        if locations.memory_url is None
        else _shown(locations.memory_url, locations.memory_path)
    )
    return [
        f"Oh {__version__} serving memory from {where}",
        f"  HTTP API   {base}/v1  (OpenAPI: {base}/openapi.json)",
        f"  MCP        {base}/mcp  (agent token from opening a notebook)",
        f"  Panel      {base}/panel  (sign in with an owner token)",
        f"  Owner token: {owner_token_command(locations)}",
    ]


def owner_token_command(locations: Locations, owner: str = "you") -> str:
    """The command that creates an owner token for these databases, working as written from
    any directory (the banner prints it; the panel's sign-in page shows it)."""
    token = shlex.join(["token", "create", "--owner", owner, *_location_flags(locations)])
    return f"{oh_command()} {token}"


def oh_command() -> str:
    """How to run this same ``oh`` from a shell: ``oh`` when that is what PATH finds, else
    the absolute path of the running script (after ``.venv/bin/pip install``, ``oh`` is not
    on PATH), else this interpreter with ``-m oh.cli``."""
    script = sys.argv[0] if sys.argv else ""
    if Path(script).stem == "oh" and Path(script).is_file():
        running = os.path.abspath(script)
        on_path = shutil.which("oh")
        if on_path is not None and os.path.samefile(on_path, running):
            return "oh"
        return shlex.quote(running)
    return f"{shlex.quote(sys.executable)} -m oh.cli"


def _location_flags(locations: Locations) -> list[str]:
    flags = []
    if locations.memory_url is None or locations.knowledge_url is None:
        flags += ["--data", str(locations.data_dir.resolve())]
    if locations.memory_url is not None:
        flags += ["--memory-url", _shown(locations.memory_url, locations.memory_path)]
    if locations.knowledge_url is not None:
        flags += ["--knowledge-url", _shown(locations.knowledge_url, locations.knowledge_path)]
    return flags


def _shown(url: str, path: Callable[[], Path]) -> str:
    """A database URL as the banner shows it: an embedded one as its absolute path, a
    PostgreSQL one with its password masked (the banner ends up in logs)."""
    if not is_postgres_url(url):
        return str(path().resolve())
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def _recall_arguments(command: argparse.ArgumentParser) -> None:
    """``--recall`` and ``--recall-deadline``: the same for ``oh serve`` and ``oh mcp``."""
    command.add_argument(
        "--recall",
        choices=["off", "shadow", "on"],
        default=None,
        help="the recall tool (env OH_RECALL): shadow (computed and measured, the agent gets no"
        " rows; the default on the embedded backend), on, or off (no recall tool; the default"
        " on PostgreSQL)",
    )
    command.add_argument(
        "--recall-deadline",
        type=parse_every,
        default=None,
        metavar="SECONDS",
        help="the longest one recall may take before it answers storage_unavailable"
        " (env OH_RECALL_DEADLINE, default 2)",
    )


def cmd_index(args: argparse.Namespace) -> int:
    from oh.recall.cli import rebuild_command

    return int(rebuild_command(args))


def cmd_token(args: argparse.Namespace) -> int:
    from oh.host import open_host

    if args.action != "create":
        raise SystemExit("oh token: the only action is create")
    host = open_host(Locations.from_args(args, create=True))  # it may start a data directory
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
    from oh.schemas import ARGUMENTS, BODIES, RESULTS, TOOL_CONTRACT_VERSION

    print(
        json.dumps(
            {
                "tool_contract_version": TOOL_CONTRACT_VERSION,
                "arguments": ARGUMENTS,
                "results": RESULTS,
                "bodies": BODIES,
            },
            indent=2,
            sort_keys=True,
        )
    )
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from oh.demo import run_demo

    if args.data:
        # Like every command but serve and token create, it writes only into an existing
        # directory: a mistyped --data is refused, not created.
        Locations(Path(args.data), create=False).prepare(knowledge=False)
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
    "schemas": (
        "print the JSON Schemas of every tool's arguments and results and of the owner's bodies",
        cmd_schemas,
    ),
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
            _recall_arguments(command)
            command.add_argument("--host", default="127.0.0.1", help="address (127.0.0.1)")
            command.add_argument("--port", type=int, default=8765, help="port (8765)")
            command.add_argument("--log-level", default="warning", help="uvicorn log level")
        if name == "mcp":
            command.add_argument("--notebook", required=True, metavar="ID")
            _recall_arguments(command)
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
                type=parse_grace,
                default=600.0,
                metavar="SECONDS",
                help="mark empty a notebook still opening after this long (default and least 600)",
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
