"""Errors that say what to do, tried against a real ``oh serve`` as a newcomer meets them.

An agent route tells apart a missing token, an owner's token, a malformed one, one this host
never issued and one for another notebook, each with what to send instead, while never telling
whether a notebook exists (an unknown notebook answers exactly as a real one does). A missing
document names the command that registers it. A mistyped tool name lists the tools. A
subcommand left out names its choices.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from oh.testing.served import Served

TOOLS = ("remember", "query", "read", "explain", "recall")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("errors") / "data") as server:
        yield server


def _remember(served: Served, notebook: str, token: str | None) -> dict[str, Any]:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    answer = httpx.post(
        f"{served.url}/v1/notebooks/{notebook}/tools/remember",
        headers=headers,
        json={"based_on": 0, "request_id": "r-1", "changes": []},
        timeout=30,
    )
    return {"status": answer.status_code, **answer.json()["error"]}


def test_an_agent_route_says_what_is_wrong_with_the_credential(served: Served) -> None:
    owner = served.owner_token("ann")
    mine = served.open_notebook("ann", "reef.pdf", "run-1")
    other = served.open_notebook("ann", "reef.pdf", "run-2")
    notebook, token = mine["notebook"]["id"], mine["agent_token"]
    forged = token[:-4] + ("0000" if not token.endswith("0000") else "1111")
    cases = {
        "none": (None, "no agent token", 401),
        "owner": (owner, "an owner token cannot call an agent's tools", 401),
        "malformed": ("hello", "malformed agent token", 401),
        "foreign": (forged, "not an agent token issued by this host", 401),
        "another notebook": (other["agent_token"], "this agent token belongs to another", 403),
    }
    for case, (sent, said, status) in cases.items():
        error = _remember(served, notebook, sent)
        assert error["status"] == status, (case, error)
        assert error["message"].startswith(said), (case, error)
        assert "oh notebook open" in error["message"], (case, error)  # where the right one is
    # Nothing tells whether a notebook exists: an unknown id answers as a real one.
    unknown = "nb_" + "0" * 32
    for case, (sent, _, _) in cases.items():
        if case == "another notebook":
            continue
        assert _remember(served, unknown, sent) == _remember(served, notebook, sent), case


def test_a_missing_document_names_the_command_that_registers_it(served: Served) -> None:
    owner = {"Authorization": f"Bearer {served.owner_token('bob')}"}
    answer = httpx.post(
        f"{served.url}/v1/documents/never-put/notebooks", headers=owner, json={"run": "r"}
    )
    assert answer.status_code == 404
    message = answer.json()["error"]["message"]
    assert "oh document put --owner OWNER never-put" in message, message


def test_a_mistyped_tool_lists_the_five(served: Served) -> None:
    opened = served.open_notebook("ann", "reef.pdf", "run-tools")
    agent = {"Authorization": f"Bearer {opened['agent_token']}"}
    notebook = opened["notebook"]["id"]
    answer = httpx.post(
        f"{served.url}/v1/notebooks/{notebook}/tools/remembr", headers=agent, json={}
    )
    assert answer.status_code == 404
    message = answer.json()["error"]["message"]
    assert all(tool in message for tool in TOOLS), message


@pytest.mark.parametrize(
    ("argv", "choices"),
    [(["index"], ["rebuild"]), (["token"], ["create"]), (["key"], ["status"])],
)
def test_a_subcommand_left_out_names_its_choices(argv: list[str], choices: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "oh.cli", *argv], capture_output=True, text=True, check=False
    )
    assert done.returncode == 2
    assert "required: action" not in done.stderr, done.stderr
    assert all(choice in done.stderr for choice in choices), done.stderr


def test_nothing_shown_before_sign_in_holds_a_path_of_the_server(served: Served) -> None:
    """The owner-route 401 and the panel's sign-in page name the command to run, never where
    the server keeps its data (the banner, on the server's console, has the exact command)."""
    where = str(served.data.parent)
    refused = httpx.get(f"{served.url}/v1/notebooks", timeout=30)
    login = httpx.get(f"{served.url}/panel/login", timeout=30)
    for shown in (refused.text, login.text):
        assert "oh token create --owner NAME" in shown, shown
        assert where not in shown and "/tmp" not in shown, shown


def test_locations_take_a_path_as_text(tmp_path: Path) -> None:
    from oh.config import Locations, close_host, open_host
    from oh.errors import InvalidArgument
    from oh.testing.lifecycle import FakeClock

    where = str(tmp_path / "data")
    host = open_host(Locations(where), clock=FakeClock())
    try:
        assert host.register_document("you", "doc")
    finally:
        close_host(host)
    assert Locations(where) == Locations(Path(where))
    with pytest.raises(InvalidArgument):
        Locations(3)  # type: ignore[arg-type]
