"""``oh document put`` and ``oh notebook open``: from a shell to an agent with memory, run as a
user runs them (the installed ``oh`` script), the printed MCP client configuration used as it is
by the official MCP client."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

# The ``oh`` script beside this interpreter: what the README's set-up command installs.
OH = Path(sys.executable).parent / "oh"


def oh(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [str(OH)] if OH.is_file() else [sys.executable, "-m", "oh.cli"]
    return subprocess.run(
        [*command, *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


@pytest.fixture
def shell(tmp_path: Path) -> Path:
    """A working directory where ``oh token create`` started ``./oh-data``."""
    done = oh(tmp_path, "token", "create", "--owner", "ann", "--data", "oh-data")
    assert done.returncode == 0, done.stderr
    return tmp_path


def test_document_put_registers_once_and_refuses_another_owner(shell: Path) -> None:
    first = oh(shell, "document", "put", "--owner", "ann", "report-42", "--data", "oh-data")
    again = oh(shell, "document", "put", "--owner", "ann", "report-42", "--data", "oh-data")
    theirs = oh(shell, "document", "put", "--owner", "bob", "report-42", "--data", "oh-data")
    assert (first.returncode, first.stdout) == (0, "document report-42 registered to ann\n")
    assert (again.returncode, again.stdout) == (
        0,
        "document report-42 was already registered to ann\n",
    )
    assert (theirs.returncode, theirs.stdout) == (2, "")
    assert theirs.stderr == "oh document: forbidden: document report-42 belongs to another owner\n"
    # Bob's attempt changed nothing: ann opens a notebook on it, bob cannot.
    assert _open(shell, "ann", "run-1")["created"] is True
    refused = oh(shell, "notebook", "open", "--owner", "bob", "--document", "report-42",
                 "--run", "r", "--data", "oh-data")  # fmt: skip
    assert refused.returncode == 2 and "forbidden" in refused.stderr


def _open(shell: Path, owner: str, run: str, *more: str) -> dict[str, Any]:
    done = oh(
        shell, "notebook", "open", "--owner", owner, "--document", "report-42", "--run", run,
        "--data", "oh-data", "--json", *more,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def test_notebook_open_prints_a_config_the_official_client_uses_as_it_is(
    shell: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    put = oh(shell, "document", "put", "--owner", "ann", "report-42", "--data", "oh-data")
    assert put.returncode == 0, put.stderr
    opened = _open(shell, "ann", "run-1", "--url", "http://127.0.0.1:9999/")
    assert opened["created"] is True
    notebook = opened["notebook"]
    assert notebook["state"] == "open" and notebook["version"] == 0
    assert opened["mcp_url"] == "http://127.0.0.1:9999/mcp"
    server = opened["mcp_config"]["mcpServers"]["oh"]
    # Absolute paths: the configuration works from any directory, with no oh on PATH.
    assert Path(server["command"]).is_absolute()
    data = server["args"][server["args"].index("--data") + 1]
    assert data == str((shell / "oh-data").resolve())
    assert server["env"] == {"OH_AGENT_TOKEN": opened["agent_token"]}
    assert opened["mcp_config_http"]["mcpServers"]["oh"] == {
        "type": "http",
        "url": "http://127.0.0.1:9999/mcp",
        "headers": {"Authorization": f"Bearer {opened['agent_token']}"},
    }
    # The same run again: the same notebook and token, not a second notebook.
    again = _open(shell, "ann", "run-1")
    assert (again["created"], again["notebook"]["id"], again["agent_token"]) == (
        False,
        notebook["id"],
        opened["agent_token"],
    )

    elsewhere = tmp_path_factory.mktemp("elsewhere")
    parameters = StdioServerParameters(
        command=server["command"], args=server["args"], env=server["env"], cwd=str(elsewhere)
    )

    async def agent() -> None:
        with (elsewhere / "stderr.log").open("w") as errlog:
            async with Client(stdio_client(parameters, errlog=errlog)) as client:
                tools = [tool.name for tool in (await client.list_tools()).tools]
                assert tools[:4] == ["remember", "query", "read", "explain"]
                change = {"op": "add", "record": {"name": "lead:a", "text": "methods missing"}}
                written = await client.call_tool(
                    "remember", {"based_on": 0, "request_id": "r-1", "changes": [change]}
                )
                assert written.structured_content is not None
                assert written.structured_content["status"] == "applied"
                read = await client.call_tool("read", {"name": "lead:a"})
                assert read.structured_content is not None
                assert read.structured_content["text"] == "methods missing"

    anyio.run(agent)
    # What the agent wrote is in the notebook the command opened, not in a new data directory.
    assert not (elsewhere / "oh-data").exists()
    assert _open(shell, "ann", "run-1")["notebook"]["version"] == 1


def test_notebook_open_refuses_an_unregistered_document_and_a_missing_data_dir(
    shell: Path,
) -> None:
    done = oh(shell, "notebook", "open", "--owner", "ann", "--document", "nope", "--run", "r",
              "--data", "oh-data")  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.startswith("oh notebook: not_found: no document nope: register it first")
    assert "oh document put --owner OWNER nope" in done.stderr  # what to run
    bad_pin = oh(shell, "notebook", "open", "--owner", "ann", "--document", "nope", "--run", "r",
                 "--pin", "1.5", "--data", "oh-data")  # fmt: skip
    assert bad_pin.returncode == 2 and "a revision is latest or a number" in bad_pin.stderr


def test_notebook_open_names_the_server_that_runs_or_oh_url_and_needs_no_mcp_sdk(
    tmp_path: Path,
) -> None:
    """On another port than 8765, the printed MCP configs point where the server listens: the
    address the running ``oh serve`` recorded, or ``OH_URL``, or ``--url``; and printing them
    loads no MCP SDK (it is the slow import of the command)."""
    from oh.testing.served import Served

    data = tmp_path / "data"
    open_args = ["notebook", "open", "--owner", "ann", "--document", "doc", "--run"]
    with Served(data) as served:
        served.owner_token("ann")
        put = oh(tmp_path, "document", "put", "--owner", "ann", "doc", "--data", str(data))
        assert put.returncode == 0, put.stderr
        seen = oh(tmp_path, *open_args, "r-1", "--data", str(data), "--json")
        assert seen.returncode == 0, seen.stderr
        assert json.loads(seen.stdout)["mcp_url"] == f"{served.url}/mcp"
    after = oh(tmp_path, *open_args, "r-1", "--data", str(data), "--json")
    assert json.loads(after.stdout)["mcp_url"] == "http://127.0.0.1:8765/mcp"  # none runs now
    env = {**os.environ, "OH_URL": "http://127.0.0.1:9000"}
    told = subprocess.run(
        [sys.executable, "-m", "oh.cli", *open_args, "r-1", "--data", str(data), "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    assert json.loads(told.stdout)["mcp_url"] == "http://127.0.0.1:9000/mcp"
    flag = oh(tmp_path, *open_args, "r-1", "--data", str(data), "--url", "http://h:1", "--json")
    assert json.loads(flag.stdout)["mcp_url"] == "http://h:1/mcp"
    probe = (
        "import sys; from oh.cli import main; code = main(sys.argv[1:]);"
        " assert 'mcp' not in sys.modules, 'the MCP SDK was imported'; raise SystemExit(code)"
    )
    light = subprocess.run(
        [sys.executable, "-c", probe, *open_args, "r-1", "--data", str(data)],
        capture_output=True,
        text=True,
    )
    assert light.returncode == 0, light.stderr
