"""``oh postgres roles``, ``oh schemas`` and ``oh demo``: what an operator or a host's developer
reads before anything runs — the SQL for the PostgreSQL roles, the published JSON Schemas, and
the reef-recovery walk-through in a throwaway store (or an existing ``--data``).
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from oh.config import Locations

__all__ = ["cmd_demo", "cmd_postgres", "cmd_schemas", "configure_postgres"]


def configure_postgres(command: argparse.ArgumentParser) -> None:
    command.add_argument("action", choices=["roles"], metavar="{roles}")
    command.add_argument("--schema", default="oh")
    command.add_argument("--app-role", default="oh_app")
    command.add_argument("--purge-role", default="oh_purge")


def cmd_postgres(args: argparse.Namespace) -> int:
    from oh.storage.postgres.notebooks import roles_sql

    print(roles_sql(schema=args.schema, app_role=args.app_role, purge_role=args.purge_role), end="")
    return 0


def cmd_schemas(args: argparse.Namespace) -> int:
    from oh.tools.schemas import ARGUMENTS, BODIES, RESULTS, TOOL_CONTRACT_VERSION

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
    from oh.cli.demo import run_demo

    if args.data:
        # Like every command but serve and token create, it writes only into an existing
        # directory: a mistyped --data is refused, not created.
        Locations(Path(args.data), create=False).prepare(knowledge=False)
        return 0 if run_demo(Path(args.data), print) else 1
    with tempfile.TemporaryDirectory(prefix="oh-demo-") as tmp:
        return 0 if run_demo(Path(tmp), print) else 1
