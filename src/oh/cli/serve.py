"""``oh serve``, ``oh mcp`` and ``oh token create``: the reference host, served to agents and
owners, and the owner tokens it checks.

``oh serve`` binds its port before anything is opened and prints its banner only once the port
accepts connections; the banner names an owner-token command that works as written from any
directory (``owner_token_command``, which the panel's sign-in page shows too).
"""

from __future__ import annotations

import argparse
import errno
import os
import shlex
import shutil
import socket
import sys
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from oh._version import __version__
from oh.cli.options import parse_every, read_locations
from oh.config import (
    Locations,
    RecallConfig,
    close_host,
    is_postgres_url,
    open_agent_host,
    open_host,
)
from oh.errors import Forbidden, Unauthenticated

__all__ = [
    "cmd_mcp",
    "cmd_serve",
    "cmd_token",
    "configure_mcp",
    "configure_serve",
    "configure_token",
    "location_flags",
    "oh_command",
    "owner_token_command",
    "this_oh",
]


def configure_serve(command: argparse.ArgumentParser) -> None:
    _recall_arguments(command)
    command.add_argument("--host", default="127.0.0.1", help="address (127.0.0.1)")
    command.add_argument("--port", type=int, default=8765, help="port (8765)")
    command.add_argument("--log-level", default="warning", help="uvicorn log level")


def configure_mcp(command: argparse.ArgumentParser) -> None:
    command.add_argument("--notebook", required=True, metavar="ID")
    _recall_arguments(command)


def configure_token(command: argparse.ArgumentParser) -> None:
    command.add_argument("action", choices=["create"])
    command.add_argument("--owner", required=True, metavar="NAME")


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


def cmd_serve(args: argparse.Namespace) -> int:
    locations = read_locations(args, create=True)
    # Bound before anything is opened (or the server's modules even imported): a taken port
    # stops here at once and creates nothing, and the banner can name the port actually
    # bound (--port 0 lets the system choose).
    listener = _listen(args.host, args.port)
    try:
        import uvicorn

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
        f"  HTTP API   {base}/v1  (reference: {base}/docs, OpenAPI: {base}/openapi.json)",
        f"  MCP        {base}/mcp  (agent token and client config: oh notebook open)",
        f"  Panel      {base}/panel  (sign in with an owner token)",
        f"  Owner token: {owner_token_command(locations)}",
    ]


def owner_token_command(locations: Locations, owner: str = "you") -> str:
    """The command that creates an owner token for these databases, working as written from
    any directory (the banner prints it; the panel's sign-in page shows it)."""
    token = shlex.join(["token", "create", "--owner", owner, *location_flags(locations)])
    return f"{oh_command()} {token}"


def oh_command() -> str:
    """How to run this same ``oh`` from a shell: ``oh`` when that is what PATH finds, else
    ``this_oh`` quoted (after ``.venv/bin/pip install``, ``oh`` is not on PATH)."""
    command = this_oh()
    on_path = shutil.which("oh")
    if len(command) == 1 and on_path is not None and os.path.samefile(on_path, command[0]):
        return "oh"
    return shlex.join(command)


def this_oh() -> list[str]:
    """The running ``oh`` as an absolute command line: the ``oh`` script when that is what
    runs, else this interpreter with ``-m oh.cli``."""
    script = sys.argv[0] if sys.argv else ""
    if Path(script).stem == "oh" and Path(script).is_file():
        return [os.path.abspath(script)]
    return [sys.executable, "-m", "oh.cli"]


def location_flags(locations: Locations) -> list[str]:
    """The flags that name these databases to another ``oh`` command, as absolute paths."""
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


def cmd_mcp(args: argparse.Namespace) -> int:
    """``oh mcp --notebook ID``: the agent token comes from ``OH_AGENT_TOKEN``.

    A missing token or one for another notebook stops here, before serving; a notebook that
    expired or was forgotten is still served, and every call answers ``expired`` / ``purged``.
    """
    from oh.mcp import AGENT_TOKEN_ENV, run_stdio

    token = os.environ.get(AGENT_TOKEN_ENV) or None
    if token is None:
        raise Unauthenticated(f"set {AGENT_TOKEN_ENV} to the agent token of the notebook")
    locations = read_locations(args)
    # The same recall as `oh serve` on these databases: same options, same defaults.
    recall = RecallConfig.resolve(
        locations, getattr(args, "recall", None), getattr(args, "recall_deadline", None)
    )
    host = open_agent_host(locations, recall)
    try:
        if host.agent(token) != args.notebook:
            raise Forbidden(f"{AGENT_TOKEN_ENV} belongs to another notebook than {args.notebook}")
        run_stdio(host, args.notebook, token)
    finally:
        close_host(host)
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    if args.action != "create":
        raise SystemExit("oh token: the only action is create")
    host = open_host(read_locations(args, create=True))  # it may start a data directory
    token = host.create_owner_token(args.owner)
    print(f"owner token for {args.owner} (shown once; only its hash is stored):")
    print(token)
    return 0
