"""``oh document put`` and ``oh notebook open``: an agent's way in without hand-made HTTP calls.

``oh notebook open`` opens (or finds) a run's notebook on the data directory or databases given,
and prints what an agent developer needs: the notebook id, its agent token, the MCP URL of
``oh serve`` and a ready-to-paste ``mcpServers`` client configuration. The configuration runs
``oh mcp`` over stdio with absolute paths (this ``oh`` and these databases), so it works from a
virtual environment and needs no server; the streamable HTTP form is printed beside it.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from oh.cli.options import read_locations, recorded_address
from oh.cli.serve import location_flags, this_oh
from oh.config import close_host, open_host
from oh.services.access import AGENT_TOKEN_ENV

__all__ = [
    "cmd_document",
    "cmd_notebook",
    "configure_document",
    "configure_notebook",
    "mcp_configs",
]

DEFAULT_URL = "http://127.0.0.1:8765"  # where ``oh serve`` listens unless told otherwise


def configure_document(command: argparse.ArgumentParser) -> None:
    command.add_argument("action", choices=["put"], metavar="{put}")
    command.add_argument("document", metavar="DOC", help="the document's id in your host")
    command.add_argument("--owner", required=True, metavar="NAME")


def configure_notebook(command: argparse.ArgumentParser) -> None:
    command.add_argument("action", choices=["open"], metavar="{open}")
    command.add_argument("--owner", required=True, metavar="NAME")
    command.add_argument("--document", required=True, metavar="DOC")
    command.add_argument("--run", required=True, metavar="RUN", help="the agent run's id")
    command.add_argument(
        "--pin",
        default="latest",
        type=_pin,
        metavar="REVISION",
        help="the knowledge revision the run reads: latest (default) or a number",
    )
    command.add_argument("--run-kind", default="chat", metavar="KIND", help="(chat)")
    command.add_argument(
        "--url",
        help="where oh serve listens, for the MCP URL (default: OH_URL, else the address the"
        f" oh serve running on this data directory recorded, else {DEFAULT_URL})",
    )
    command.add_argument(
        "--json", action="store_true", help="print one JSON object (for scripts) instead"
    )


def _pin(text: str) -> str | int:
    if text == "latest":
        return text
    if text.isascii() and text.isdigit():
        return int(text)
    raise argparse.ArgumentTypeError("a revision is latest or a number")


def cmd_document(args: argparse.Namespace) -> int:
    """``oh document put --owner O DOC``: register a document to its owner (idempotent)."""
    host = open_host(read_locations(args))
    try:
        created = host.register_document(args.owner, args.document)
    finally:
        close_host(host)
    said = "registered to" if created else "was already registered to"
    print(f"document {args.document} {said} {args.owner}")
    return 0


def cmd_notebook(args: argparse.Namespace) -> int:
    """``oh notebook open --owner O --document D --run R``: the run's notebook and the ways an
    agent reaches it."""
    locations = read_locations(args)
    host = open_host(locations)
    try:
        notebook, created = host.open_notebook(
            args.owner, args.document, args.run, args.pin, args.run_kind
        )
        token = host.agent_token(notebook.id)
    finally:
        close_host(host)
    url = args.url or os.environ.get("OH_URL") or recorded_address(locations) or DEFAULT_URL
    mcp_url = f"{url.rstrip('/')}/mcp"
    stdio, http = mcp_configs(notebook.id, token, mcp_url, location_flags(locations))
    if args.json:
        answer = {
            "notebook": notebook.to_json(),
            "created": created,
            "agent_token": token,
            "mcp_url": mcp_url,
            "mcp_config": stdio,
            "mcp_config_http": http,
        }
        print(json.dumps(answer, indent=2))
        return 0
    opened = "opened" if created else "was already open"
    print(f"notebook {notebook.id} {opened}: run {args.run} of {args.document} ({args.owner})")
    print(f"  forgets at   {notebook.forgets_at}")
    print(f"  agent token  {token}")
    print(f"  MCP URL      {mcp_url}  (served by oh serve)")
    print()
    print("MCP client config (stdio: no server needed; Claude Desktop, Claude Code, Cursor):")
    print(json.dumps(stdio, indent=2))
    print()
    print("Or, with oh serve running, over streamable HTTP:")
    print(json.dumps(http, indent=2))
    return 0


def mcp_configs(
    notebook_id: str, token: str, mcp_url: str, locations: list[str]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``mcpServers`` configurations for one notebook: ``oh mcp`` over stdio, run by this
    very ``oh`` with absolute database locations, and the streamable HTTP endpoint."""
    command, *prefix = this_oh()
    stdio = {
        "mcpServers": {
            "oh": {
                "command": command,
                "args": [*prefix, "mcp", "--notebook", notebook_id, *locations],
                "env": {AGENT_TOKEN_ENV: token},
            }
        }
    }
    http = {
        "mcpServers": {
            "oh": {
                "type": "http",
                "url": mcp_url,
                "headers": {"Authorization": f"Bearer {token}"},
            }
        }
    }
    return stdio, http
