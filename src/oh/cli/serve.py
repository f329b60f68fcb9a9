"""``oh serve``, ``oh mcp`` and ``oh token create``: the reference host, served to agents and
owners, and the owner tokens it checks.

``oh serve`` binds its port before anything is opened and prints its banner only once the port
accepts connections; the banner names an owner-token command that works as written from any
directory (``owner_token_command``; a caller not yet signed in, on the panel's sign-in page or
in a 401, is told ``PUBLIC_OWNER_TOKEN_COMMAND``, which names no path). Both serving
commands run the purge worker in a process of its own unless told ``--no-purge``
(``oh.cli.purge_worker``).
"""

from __future__ import annotations

import argparse
import errno
import multiprocessing
import os
import shlex
import shutil
import signal
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from oh._version import __version__
from oh.cli.keys import warn_created
from oh.cli.options import (
    StopFlag,
    forget_address,
    parse_every,
    process_count,
    read_locations,
    record_address,
)
from oh.cli.purge_worker import DEFAULT_PURGE_EVERY, PURGE_STATUS_FILE, PurgeWorker
from oh.config import (
    Locations,
    RecallConfig,
    close_host,
    masked_url,
    open_agent_host,
    open_host,
    start_master_key,
)
from oh.errors import Forbidden, OhError, Unauthenticated
from oh.storage.backends import backend_of

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
    "parse_workers",
    "this_oh",
]


def configure_serve(command: argparse.ArgumentParser) -> None:
    _recall_arguments(command)
    _purge_arguments(command)
    command.add_argument("--host", default="127.0.0.1", help="address (127.0.0.1)")
    command.add_argument("--port", type=int, default=8765, help="port (8765)")
    command.add_argument("--log-level", default="warning", help="uvicorn log level")
    command.add_argument(
        "--workers",
        type=parse_workers,
        default=1,
        metavar="N",
        help="server processes answering on the same port over the same databases (1)",
    )


def parse_workers(text: str) -> int:
    """``--workers``: ``process_count``, refused by argparse like every other bad flag value."""
    try:
        return process_count(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def configure_mcp(command: argparse.ArgumentParser) -> None:
    command.add_argument("--notebook", required=True, metavar="ID")
    _recall_arguments(command)
    _purge_arguments(command)


def configure_token(command: argparse.ArgumentParser) -> None:
    command.add_argument("action", choices=["create"], metavar="{create}")
    command.add_argument("--owner", required=True, metavar="NAME")


def _purge_arguments(command: argparse.ArgumentParser) -> None:
    """``--purge-every`` and ``--no-purge``: the same for ``oh serve`` and ``oh mcp``."""
    command.add_argument(
        "--purge-every",
        type=parse_every,
        default=DEFAULT_PURGE_EVERY,
        metavar="SECONDS",
        help="forget expired notebooks every SECONDS (or 30s, 5m, 1h) in a purge process of"
        f" its own (default {DEFAULT_PURGE_EVERY:g})",
    )
    command.add_argument(
        "--no-purge",
        action="store_true",
        help="run no purge worker: for deployments that run oh purge --every elsewhere",
    )
    command.add_argument(
        "--purge-url",
        metavar="URL",
        default=None,
        help="the memory database the purge worker connects to (env OH_PURGE_URL; on"
        " PostgreSQL, the purge role's URL; default the memory database itself)",
    )
    command.add_argument(
        "--purge-keys-url",
        metavar="URL",
        default=None,
        help="the key database the purge worker connects to (env OH_PURGE_KEYS_URL: the purge"
        " role's URL on the key store of --keys-url; default the key store itself)",
    )


def _purge_worker(args: argparse.Namespace, locations: Locations) -> PurgeWorker | None:
    """The purge worker a serving command starts, or None with ``--no-purge``."""
    if getattr(args, "no_purge", False):
        return None
    purge_url = getattr(args, "purge_url", None) or os.environ.get("OH_PURGE_URL") or None
    if purge_url is not None:
        # On PostgreSQL the purge role's URL: a credential that can delete expired notebooks
        # and nothing else (the embedded backend's purge connection is restricted anyway).
        locations = replace(locations, memory_url=purge_url)
    keys_url = getattr(args, "purge_keys_url", None) or os.environ.get("OH_PURGE_KEYS_URL")
    if keys_url:
        # The purge role on the key database: it can destroy data keys and nothing else.
        locations = replace(locations, keys_url=keys_url)
    return PurgeWorker(
        this_oh(),
        _child_environment(locations),
        getattr(args, "purge_every", DEFAULT_PURGE_EVERY),
        locations.keys_path() / PURGE_STATUS_FILE,
    )


def _child_environment(locations: Locations) -> dict[str, str]:
    """The locations as a child ``oh`` reads them from its environment, absolute, unmasked."""
    env = {"OH_DATA": str(locations.data_dir.resolve())}
    env["OH_KEYS"] = str(locations.keys_path().resolve())
    if locations.keys_url is not None:
        env["OH_KEYS_URL"] = locations.keys_url
    for name, url, path in (
        ("OH_MEMORY_URL", locations.memory_url, locations.memory_path),
        ("OH_KNOWLEDGE_URL", locations.knowledge_url, locations.knowledge_path),
    ):
        if url is not None:
            env[name] = backend_of(url).place(url, path)
    return env


def _recall_arguments(command: argparse.ArgumentParser) -> None:
    """``--recall`` and ``--recall-deadline``: the same for ``oh serve`` and ``oh mcp``."""
    command.add_argument(
        "--recall",
        choices=["off", "shadow", "on"],
        default=None,
        help="the recall tool (env OH_RECALL): shadow (computed and measured, the agent gets no"
        " rows; the default), on, or off (no recall tool)",
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
    purge: PurgeWorker | None = None
    try:
        _start_keys(locations, "serve")  # here, so that every worker opens the same key
        port = int(listener.getsockname()[1])
        shown_host = f"[{args.host}]" if ":" in args.host else args.host
        base = f"http://{shown_host}:{port}"
        purge = _purge_worker(args, locations)
        worker = _Worker(
            locations=locations,
            recall=RecallConfig.resolve(locations, args.recall, args.recall_deadline),
            base=base,
            # Shown to callers not yet signed in (the 401 of an owner route, the panel's
            # sign-in page): no path of this machine. The banner prints the exact command.
            owner_token_command=PUBLIC_OWNER_TOKEN_COMMAND,
            log_level=args.log_level,
            purge_every=None if purge is None else purge.every,
            purge_status=None if purge is None else purge.status_file,
        )
        banner = _banner(locations, base, purge)

        def started() -> None:
            # The purge worker starts once the server opened (and made) the databases.
            if purge is not None:
                purge.start()
            record_address(locations, base)
            print("\n".join(banner), flush=True)

        workers = getattr(args, "workers", 1)
        if workers == 1:
            worker.serve(listener, started)
        else:
            return _supervise(worker, workers, listener, started)
    finally:
        forget_address(locations)
        if purge is not None:
            purge.stop()
        listener.close()
    return 0


def _start_keys(locations: Locations, command: str) -> None:
    """A command that starts a data directory creates the master key when none is configured
    (docs/keys.md), after the data location is made, and says so once."""
    locations.prepare()
    created = start_master_key(locations)
    if created is not None:
        warn_created(command, created)


@dataclass(frozen=True)
class _Worker:
    """What one serving process needs: the same in the only process and in each of N."""

    locations: Locations
    recall: RecallConfig
    base: str
    owner_token_command: str
    log_level: str
    purge_every: float | None = None  # None: no purge worker runs beside this server
    purge_status: Path | None = None

    def serve(
        self,
        listener: socket.socket,
        started: Callable[[], None],
        *,
        background: bool = True,
    ) -> None:
        """Serve on ``listener`` until told to stop; ``started`` once it accepts connections.

        ``background`` says whether this process runs the host's background work (the recall
        catch-up loop): with N processes only the first does. The others would only repeat it
        (its writes are idempotent) and every query reads the vectors it stored anyway."""
        import uvicorn

        from oh.transports.http import create_app
        from oh.transports.mcp import mcp_app

        host = open_agent_host(
            self.locations,
            self.recall,
            public_url=self.base,
            owner_token_command=self.owner_token_command,
        )
        try:
            if not background and host.recall_catch_up is not None:
                host.recall_catch_up.stop()
            # Reads run on the event loop only when the database is a local file.
            inline = backend_of(self.locations.memory_url).local
            app = create_app(
                host,
                mcp=mcp_app(host, reads_inline=inline),
                reads_inline=inline,
                batch_writes=inline,
                purge=None
                if self.purge_every is None or self.purge_status is None
                else (self.purge_every, self.purge_status),
            )

            class Server(uvicorn.Server):
                async def startup(self, sockets: list[socket.socket] | None = None) -> None:
                    await super().startup(sockets)
                    # Only now is the socket accepting: a client that reads "serving" and
                    # connects at once is answered.
                    if self.started:
                        started()

            config = uvicorn.Config(app, log_level=self.log_level)
            Server(config).run(sockets=[listener])
        finally:
            close_host(host)  # uvicorn has stopped serving: end the background work


def _run_worker(worker: _Worker, index: int, listener: socket.socket, ready: Any) -> None:
    """One of N serving processes (started by ``_supervise``)."""
    try:
        worker.serve(listener, ready.set, background=index == 0)
    except OhError as exc:
        raise SystemExit(f"oh serve: worker {index}: {exc.code}: {exc.message}") from None


def _supervise(
    worker: _Worker, count: int, listener: socket.socket, started: Callable[[], None]
) -> int:
    """``--workers N``: N processes accepting on the one bound socket, started one after the
    other (the first creates or migrates what the databases lack before the next opens them);
    ``started`` (the purge worker, the banner) once all of them serve. A process that ends
    while serving is started again; one that cannot start stops them all (exit status 1).
    SIGTERM or SIGINT stops them all."""
    context = multiprocessing.get_context("spawn")
    stopping = StopFlag()
    previous = {sig: signal.signal(sig, stopping.set) for sig in (signal.SIGTERM, signal.SIGINT)}
    processes: dict[int, Any] = {}

    def start(index: int) -> bool:
        ready = context.Event()
        process = context.Process(
            target=_run_worker,
            args=(worker, index, listener, ready),
            name=f"oh-serve-{index}",
        )
        process.start()
        processes[index] = process
        while not ready.wait(0.05):
            if not process.is_alive() or stopping.is_set():
                return False
        return True

    try:
        for index in range(count):
            if not start(index):
                if stopping.is_set():
                    return 0
                print(f"oh serve: worker {index} did not start", file=sys.stderr, flush=True)
                return 1
        started()
        while not stopping.is_set():
            for index, process in list(processes.items()):
                if not process.is_alive() and not stopping.is_set():
                    print(
                        f"oh serve: worker {index} ended (exit status {process.exitcode});"
                        " starting it again",
                        file=sys.stderr,
                        flush=True,
                    )
                    if not start(index) and not stopping.is_set():
                        print(f"oh serve: worker {index} did not start", file=sys.stderr)
                        return 1
            stopping.wait(0.2)
        return 0
    finally:
        for process in processes.values():
            if process.is_alive():
                process.terminate()  # uvicorn's graceful shutdown
        for process in processes.values():
            process.join(30)
            if process.is_alive():
                process.kill()
                process.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


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


def _banner(locations: Locations, base: str, purge: PurgeWorker | None = None) -> list[str]:
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
        (
            "  Purge      off (--no-purge): run oh purge --every elsewhere, or nothing is forgotten"
            if purge is None
            else f"  Purge      every {purge.every:g} s in a process of its own"
            " (expired notebooks forgotten; --no-purge to run it elsewhere)"
        ),
        f"  Owner token: {owner_token_command(locations)}",
    ]


_PUBLIC_COMMAND = "oh token create --owner NAME, run where the server runs"
PUBLIC_OWNER_TOKEN_COMMAND = f"{_PUBLIC_COMMAND} (its banner shows the exact command)"


def owner_token_command(locations: Locations, owner: str = "you") -> str:
    """The command that creates an owner token for these databases, working as written from
    any directory (the banner prints it, on the server's own console)."""
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
    if locations.keys_dir is not None or not flags:  # else the default beside --data is right
        flags += ["--keys", str(locations.keys_path().resolve())]
    if locations.memory_url is not None:
        flags += ["--memory-url", _shown(locations.memory_url, locations.memory_path)]
    if locations.knowledge_url is not None:
        flags += ["--knowledge-url", _shown(locations.knowledge_url, locations.knowledge_path)]
    if locations.keys_url is not None:
        flags += ["--keys-url", masked_url(locations.keys_url)]
    return flags


def _shown(url: str, path: Callable[[], Path]) -> str:
    """A database URL as the banner shows it: an embedded one as its absolute path, a
    PostgreSQL one with its password masked (the banner ends up in logs)."""
    return backend_of(url).shown(url, path)


def cmd_mcp(args: argparse.Namespace) -> int:
    """``oh mcp --notebook ID``: the agent token comes from ``OH_AGENT_TOKEN``.

    A missing token or one for another notebook stops here, before serving; a notebook that
    expired or was forgotten is still served, and every call answers ``expired`` / ``purged``.
    """
    from oh.transports.mcp import AGENT_TOKEN_ENV, run_stdio

    token = os.environ.get(AGENT_TOKEN_ENV) or None
    if token is None:
        raise Unauthenticated(f"set {AGENT_TOKEN_ENV} to the agent token of the notebook")
    locations = read_locations(args)
    # The same recall as `oh serve` on these databases: same options, same defaults.
    recall = RecallConfig.resolve(
        locations, getattr(args, "recall", None), getattr(args, "recall_deadline", None)
    )
    host = open_agent_host(locations, recall)
    purge: PurgeWorker | None = None
    try:
        if host.agent(token) != args.notebook:
            raise Forbidden(f"{AGENT_TOKEN_ENV} belongs to another notebook than {args.notebook}")
        purge = _purge_worker(args, locations)
        if purge is not None:
            purge.start()
        run_stdio(host, args.notebook, token)
    finally:
        if purge is not None:
            purge.stop()
        close_host(host)
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    if args.action != "create":
        raise SystemExit("oh token: the only action is create")
    locations = read_locations(args, create=True)  # it may start a data directory
    _start_keys(locations, "token create")
    host = open_host(locations)
    token = host.create_owner_token(args.owner)
    print(f"owner token for {args.owner} (shown once; only its hash is stored):")
    print(token)
    return 0
