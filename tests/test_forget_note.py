"""The owner forgets one working note (``Host.forget_note``): a logged change the owner
authors, which the agent sees as any other write, on every backend's store."""

from __future__ import annotations

from typing import Any

import pytest

from oh.errors import Expired, InvalidArgument, NotFound, Purged
from oh.host import Host
from oh.storage.memory import InMemoryStore
from oh.testing.hosts import in_memory_host
from oh.testing.lifecycle import FakeClock
from oh.verify import verify_notebook


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def world(clock: FakeClock) -> tuple[Host, InMemoryStore, str, str]:
    host, memory = in_memory_host(clock)
    host.register_document("ann", "reef")
    notebook, _ = host.open_notebook("ann", "reef", "run-1")
    token = host.agent_token(notebook.id)
    return host, memory, notebook.id, token


def _remember(host: Host, token: str, based_on: int, request_id: str, *names: str) -> Any:
    changes = [{"op": "add", "record": {"name": n, "text": f"about {n}"}} for n in names]
    return host.call_tool(
        token, "remember", {"based_on": based_on, "request_id": request_id, "changes": changes}
    )


def test_the_owner_forgets_one_note_as_a_logged_change_of_their_own(
    world: tuple[Host, InMemoryStore, str, str],
) -> None:
    host, memory, notebook_id, token = world
    assert _remember(host, token, 0, "r-1", "lead:a", "lead:b")["status"] == "applied"
    forgot = host.forget_note("ann", notebook_id, "lead:a")
    assert forgot == {"notebook": notebook_id, "version": 2, "removed": "lead:a"}
    assert [r.name for r in memory.records(notebook_id)] == ["lead:b"]
    last = list(memory.log(notebook_id))[-1]
    assert (last.author, [(c.op, c.name) for c in last.changes]) == (
        "owner:ann",
        [("remove", "lead:a")],
    )
    # The agent sees it as any other write: its next write on the old version is stale, and
    # reading the note finds nothing.
    assert _remember(host, token, 1, "r-2", "lead:c")["status"] == "refused"
    assert host.call_tool(token, "read", {"name": "lead:a"})["error"]["code"] == "not_found"
    assert verify_notebook(memory, notebook_id).ok


def test_a_write_of_the_agent_in_between_is_kept_and_the_removal_decided_again(
    world: tuple[Host, InMemoryStore, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    host, memory, notebook_id, token = world
    _remember(host, token, 0, "r-1", "lead:a")
    real = memory.remember
    raced: list[Any] = []

    def agent_first(notebook: str, **call: Any) -> Any:
        if call["author"].startswith("owner:") and not raced:
            # The agent's write lands between the owner's read of the notebook and the write.
            raced.append(None)
            raced[0] = _remember(host, token, 1, "r-2", "lead:b")
        return real(notebook, **call)

    monkeypatch.setattr(memory, "remember", agent_first)
    forgot = host.forget_note("ann", notebook_id, "lead:a")
    assert raced[0]["status"] == "applied" and forgot["version"] == 3
    assert [r.name for r in memory.records(notebook_id)] == ["lead:b"]


def test_forgetting_a_note_refuses_what_is_not_there_and_anothers_notebook(
    world: tuple[Host, InMemoryStore, str, str], clock: FakeClock
) -> None:
    host, memory, notebook_id, token = world
    _remember(host, token, 0, "r-1", "lead:a")
    with pytest.raises(NotFound):
        host.forget_note("ann", notebook_id, "lead:missing")
    with pytest.raises(InvalidArgument):
        host.forget_note("ann", notebook_id, "not a name")
    host.register_document("bob", "bob-doc")
    with pytest.raises(NotFound):  # bob learns nothing about ann's notebook
        host.forget_note("bob", notebook_id, "lead:a")
    clock.advance(hours=25)
    with pytest.raises(Expired):
        host.forget_note("ann", notebook_id, "lead:a")
    host.forget("ann", notebook_id)
    with pytest.raises(Purged):
        host.forget_note("ann", notebook_id, "lead:a")
    assert memory.notebook(notebook_id).version == 1  # nothing was written by the refusals
