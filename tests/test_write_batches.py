"""Remember calls handed over together: ``Host.remember_all`` answers each exactly as
``Host.call_tool`` answers it alone (bodies, metrics, memory cards), and ``oh serve`` on the
embedded database, which hands the remember calls waiting together to one thread at once,
answers concurrent clients as one at a time would."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from oh.config import Locations, open_host
from oh.core.clock import system_clock
from oh.host import Host, MemoryCard
from oh.testing.served import Served, oh_command
from test_mcp import Clock, close, make_host, open_run


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    host = make_host(tmp_path, Clock())
    yield host
    close(host)


def _remember(based_on: Any, request_id: str, *names: str) -> dict[str, Any]:
    changes = [{"op": "add", "record": {"name": name, "text": f"about {name}"}} for name in names]
    return {"based_on": based_on, "request_id": request_id, "changes": changes}


def _calls(
    a: tuple[str, str], b: tuple[str, str], other_token: str
) -> list[tuple[str | None, Any, str | None]]:
    (a_id, a_token), (b_id, b_token) = a, b
    return [
        (a_token, _remember(0, "a1", "note:a1"), a_id),
        (a_token, _remember(1, "a2", "note:a2", "note:a3"), a_id),
        (a_token, _remember(1, "stale", "note:x"), a_id),
        (a_token, _remember(0, "a1", "note:a1"), a_id),  # the retry
        (a_token, _remember(2, "a1", "note:y"), a_id),  # request id reused
        (None, _remember(0, "n", "note:n"), b_id),  # no token
        ("oha_forged", _remember(0, "f", "note:f"), b_id),
        (other_token, _remember(0, "o", "note:o"), b_id),  # another notebook's token
        (b_token, _remember("x", "bad", "note:b"), b_id),  # not an integer
        (b_token, {"based_on": 0, "request_id": "r", "changes": [], "extra": 1}, b_id),
        (b_token, _remember(5.0, "float", "note:b"), b_id),  # 5.0 is 5: stale, not an error
        (b_token, _remember(0.0, "b1", "note:b"), b_id),  # 0.0 is 0
    ]


def test_remember_all_answers_each_call_as_call_tool_alone(host: Host) -> None:
    cards: list[MemoryCard] = []
    host.subscribe(cards.append)
    batch = (open_run(host, "batch-a"), open_run(host, "batch-b"))
    alone = (open_run(host, "alone-a"), open_run(host, "alone-b"))
    _, third_token = open_run(host, "third")

    before = dict(host.metrics.calls)
    batched = host.remember_all(_calls(*batch, third_token))
    batch_cards = [(card.kind, card.names) for card in cards]
    cards.clear()
    middle = dict(host.metrics.calls)
    one_by_one = [
        host.call_tool(token, "remember", arguments, notebook_id)
        for token, arguments, notebook_id in _calls(*alone, third_token)
    ]
    after = dict(host.metrics.calls)

    def same_ids(bodies: list[dict[str, Any]], pair: tuple[tuple[str, str], ...]) -> str:
        text = json.dumps(bodies)
        for (notebook_id, _), name in zip(pair, ("A", "B"), strict=True):
            text = text.replace(notebook_id, name)
        return text

    assert same_ids(batched, batch) == same_ids(one_by_one, alone)
    codes = [body.get("reason") or body.get("status") or body["error"]["code"] for body in batched]
    assert codes == [
        "applied",
        "applied",
        "stale",
        "applied",
        "request_id_reused",
        "unauthenticated",
        "unauthenticated",
        "forbidden",
        "invalid_argument",
        "invalid_argument",
        "stale",
        "applied",
    ]
    # The same counts, outcome by outcome, for the batch as for the calls one by one.
    counted = {key: middle.get(key, 0) - before.get(key, 0) for key in after}
    again = {key: after.get(key, 0) - middle.get(key, 0) for key in after}
    assert counted == again
    # A memory card for each applied write, the same as alone.
    assert batch_cards == [(card.kind, card.names) for card in cards]
    assert [names for _, names in batch_cards] == [
        ("note:a1",),
        ("note:a2", "note:a3"),
        ("note:a1",),  # the retry is answered "applied", with its card, as alone
        ("note:b",),
    ]
    assert host.remember_all([]) == []


def test_concurrent_clients_of_oh_serve_are_answered_as_one_at_a_time(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Served(data) as served:
        # The server started the data directory with a master key: open it as oh does.
        setup = open_host(Locations(data, create=False), clock=system_clock)
        try:
            runs = [open_run(setup, f"run-{i}") for i in range(8)]
        finally:
            close(setup)
        failures: list[str] = []

        def writer(notebook_id: str, token: str) -> None:
            url = f"{served.url}/v1/notebooks/{notebook_id}/tools/remember"
            headers = {"Authorization": f"Bearer {token}"}
            with httpx.Client(headers=headers, timeout=30) as client:
                for version in range(25):
                    body = _remember(version, f"r{version}", f"note:n{version}")
                    answer = client.post(url, json=body).json()
                    if answer.get("version") != version + 1:
                        failures.append(f"{notebook_id} {version}: {answer}")
                        return
                    if version % 5 == 0:  # a retry and a refusal between the writes
                        if client.post(url, json=body).json() != answer:
                            failures.append(f"{notebook_id} {version}: the retry differs")
                        refused = client.post(url, json={**body, "based_on": "x"}).json()
                        if refused.get("error", {}).get("code") != "invalid_argument":
                            failures.append(f"{notebook_id} {version}: {refused}")

        threads = [threading.Thread(target=writer, args=run) for run in runs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert failures == []
    verified = subprocess.run(
        [*oh_command(), "verify", "--data", str(data), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert verified.returncode == 0, verified.stdout + verified.stderr
    report = json.loads(verified.stdout)
    assert report["ok"] is True
