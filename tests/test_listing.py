"""An owner's list of notebooks (``Host.list_notebooks``, ``GET /v1/notebooks``): newest first,
filtered by document and state as it stands now, paged by an opaque cursor, and never another
owner's. Time is a ``FakeClock``: the states are judged at the time the host is given."""

from __future__ import annotations

from typing import Any

import pytest

from oh.errors import InvalidArgument
from oh.host import Host
from oh.testing.hosts import in_memory_host
from oh.testing.lifecycle import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def host(clock: FakeClock) -> Host:
    host, _ = in_memory_host(clock)
    for owner, document in (("ann", "reef"), ("ann", "kelp"), ("bob", "bob-doc")):
        host.register_document(owner, document)
    return host


def _ids(listed: dict[str, Any]) -> list[str]:
    return [notebook["id"] for notebook in listed["notebooks"]]


def test_the_owners_notebooks_newest_first_with_their_state_now(
    host: Host, clock: FakeClock
) -> None:
    opened = []
    for run, document in (("r-1", "reef"), ("r-2", "kelp"), ("r-3", "reef")):
        opened.append(host.open_notebook("ann", document, run)[0])
        clock.advance(hours=1)
    host.open_notebook("bob", "bob-doc", "r-1")
    host.forget("ann", opened[1].id)
    clock.advance(hours=22)  # the first notebook is 24 h old: expired; the third is not
    listed = host.list_notebooks("ann")
    assert _ids(listed) == [opened[2].id, opened[1].id, opened[0].id]
    assert [n["state"] for n in listed["notebooks"]] == ["open", "purged", "expired"]
    assert listed["notebooks"][0] == {
        **opened[2].to_json(),
        "document": "reef",
        "run": "r-3",
    }
    assert listed["next_cursor"] is None
    assert _ids(host.list_notebooks("ann", document="reef")) == [opened[2].id, opened[0].id]
    assert _ids(host.list_notebooks("ann", state="expired")) == [opened[0].id]
    assert _ids(host.list_notebooks("ann", state="purged")) == [opened[1].id]
    assert _ids(host.list_notebooks("ann", document="kelp", state="open")) == []
    # Another owner's notebooks are never listed, and no owner sees bob's.
    assert len(host.list_notebooks("bob")["notebooks"]) == 1
    assert host.list_notebooks("carol") == {"notebooks": [], "next_cursor": None}


def test_pages_follow_the_cursor_and_cover_the_list_once(host: Host, clock: FakeClock) -> None:
    for i in range(7):
        host.open_notebook("ann", "reef", f"r-{i}")
        if i % 3:
            clock.advance(seconds=1)  # some share a start time: their ids order them
    whole = _ids(host.list_notebooks("ann"))
    assert len(whole) == 7
    seen, cursor, pages = [], None, 0
    while True:
        page = host.list_notebooks("ann", limit=3, cursor=cursor)
        seen += _ids(page)
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert (seen, pages) == (whole, 3)
    # A page that ends exactly at the end says so: no empty page after it.
    assert host.list_notebooks("ann", limit=7)["next_cursor"] is None
    assert host.list_notebooks("ann", limit=5.0)["next_cursor"] is not None  # 5.0 is 5


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ({"state": "closed"}, "state is one of opening, open, expired, purged, empty"),
        ({"limit": 0}, "limit is an integer from 1 to 200"),
        ({"limit": 201}, "limit is an integer from 1 to 200"),
        ({"limit": 2.5}, "limit is an integer from 1 to 200"),
        ({"limit": True}, "limit is an integer from 1 to 200"),
        ({"cursor": "not a cursor"}, "cursor is not one a listing of notebooks returned"),
        ({"cursor": "WzEsMl0"}, "cursor is not one a listing of notebooks returned"),  # [1,2]
        ({"cursor": "x" * 401}, "cursor is not one a listing of notebooks returned"),
        ({"document": "re\x00ef"}, "document"),
    ],
)
def test_a_bad_filter_or_cursor_is_invalid_argument(
    host: Host, arguments: dict[str, Any], says: str
) -> None:
    host.open_notebook("ann", "reef", "r-1")
    with pytest.raises(InvalidArgument) as raised:
        host.list_notebooks("ann", **arguments)
    assert says in raised.value.message
