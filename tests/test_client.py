"""``oh.client`` against a real ``oh serve``: the owner's and the agent's whole flow with
``Client`` and ``AsyncClient``, every error a user can cause raised as its class with its code,
and the retry guarantee proven with real faults: a TCP proxy on 127.0.0.1 between client and
server that loses an answer after the server applied the write, answers a proxy's HTML 502, or
cuts a body short."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import httpx
import pytest

import oh.client
from oh._version import __version__
from oh.client import AsyncClient, Client, Retry
from oh.errors import (
    HTTP_STATUS,
    AlreadyExists,
    Expired,
    Forbidden,
    InvalidArgument,
    NotFound,
    OhError,
    Purged,
    RequestIdReused,
    StorageUnavailable,
    TokenExpired,
    TokenInvalid,
    TooManyChanges,
    Unauthenticated,
    UnknownQuestion,
    error_for_code,
)
from oh.testing.served import Served

ROOT = Path(__file__).resolve().parents[1]
SOURCE = {
    "document": "hughes-2018.pdf",
    "passage": "Recovery took at least 10 years.",
    "locator": "p. 4",
}
FAST = Retry(attempts=3, backoff=0.01, max_backoff=0.02)


def note(name: str, text: str = "a working note", op: str = "add") -> dict[str, Any]:
    return {"op": op, "record": {"name": name, "text": text}}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("client") / "data") as running:
        yield running


@pytest.fixture(scope="module")
def ann(served: Served) -> Iterator[Client]:
    with Client(served.url, served.owner_token("ann"), retry=FAST) as client:
        yield client


@pytest.fixture(scope="module")
def bob(served: Served) -> Iterator[Client]:
    with Client(served.url, served.owner_token("bob"), retry=FAST) as client:
        yield client


def _opened(owner: Client, document: str, run: str = "run-1") -> tuple[str, Client]:
    owner.put_document(document)
    opened = owner.open_notebook(document, run)
    return opened["notebook"]["id"], owner.with_token(opened["agent_token"])


def _log(served: Served, notebook: str) -> list[dict[str, Any]]:
    """The notebook's log entries, as ``oh export`` writes them."""
    out = served.oh("export", "--notebook", notebook, "--plaintext", "--quiet").stdout
    lines = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("type") == "entry"]


# -- a proxy that fails on purpose ------------------------------------------------------------


@dataclass
class Exchange:
    method: str
    path: str
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


Plan = Callable[[Exchange], Any]

_PROXY_PAGE = (
    b"<html><head><title>502 Bad Gateway</title></head>"
    b"<body><center><h1>502 Bad Gateway</h1></center></body></html>"
)


def _read_message(stream: BinaryIO) -> tuple[bytes, bytes] | None:
    """One HTTP/1.1 message (head, body) with a Content-Length body; None at the end."""
    head = b""
    while True:
        line = stream.readline()
        if not line:
            return None
        head += line
        if line in (b"\r\n", b"\n"):
            break
    length = 0
    for header in head.split(b"\r\n")[1:]:
        name, _, value = header.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
        assert name.strip().lower() != b"transfer-encoding", "the proxy relays no chunked body"
    return head, stream.read(length)


class Proxy:
    """A TCP proxy on 127.0.0.1 in front of ``upstream`` that reads each exchange whole and does
    what ``plan(exchange)`` says: ``"relay"``; ``"drop"`` (forward the request, wait for the
    server's whole answer, then close the connection without relaying a byte of it);
    ``("late", seconds)`` (the same, after a pause); ``"truncate"`` (relay the head and half
    the body, then close); ``"html502"`` (answer a proxy's error page, forwarding nothing); or
    ``("answer", status, body)``. Every exchange is kept in ``seen``."""

    def __init__(self, upstream: str, plan: Plan = lambda _exchange: "relay") -> None:
        url = httpx.URL(upstream)
        self.upstream = (url.host, url.port)
        self.plan = plan
        self.seen: list[Exchange] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            reader = client.makefile("rb")
            while (message := _read_message(reader)) is not None:
                head, body = message
                method, path = head.split(b" ", 2)[:2]
                exchange = Exchange(method.decode(), path.decode(), body)
                self.seen.append(exchange)
                action = self.plan(exchange)
                if action == "html502":
                    client.sendall(
                        b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\n"
                        b"Content-Length: %d\r\nConnection: close\r\n\r\n%s"
                        % (len(_PROXY_PAGE), _PROXY_PAGE)
                    )
                    return
                if isinstance(action, tuple) and action[0] == "answer":
                    _, status, content = action
                    client.sendall(
                        b"HTTP/1.1 %d Whatever\r\nContent-Type: application/json\r\n"
                        b"Content-Length: %d\r\n\r\n%s" % (status, len(content), content)
                    )
                    continue
                if upstream is None:
                    upstream = socket.create_connection(self.upstream)
                    answers = upstream.makefile("rb")
                upstream.sendall(head + body)
                answered = _read_message(answers)
                assert answered is not None, "the server closed the connection"
                answer_head, answer_body = answered
                if action == "drop":
                    return
                if isinstance(action, tuple) and action[0] == "late":
                    time.sleep(action[1])
                    return
                if action == "truncate":
                    client.sendall(answer_head + answer_body[: len(answer_body) // 2])
                    return
                client.sendall(answer_head + answer_body)
        except OSError:
            return
        finally:
            client.close()
            if upstream is not None:
                upstream.close()

    def calls(self, suffix: str) -> list[Exchange]:
        return [exchange for exchange in self.seen if exchange.path.endswith(suffix)]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()


@pytest.fixture
def proxy_of(served: Served) -> Iterator[Callable[[Plan], Proxy]]:
    made: list[Proxy] = []

    def make(plan: Plan) -> Proxy:
        made.append(Proxy(served.url, plan))
        return made[-1]

    yield make
    for proxy in made:
        proxy.close()


def always(action: Any) -> Plan:
    return lambda _exchange: action


def once(action: Any, where: str) -> Plan:
    """A plan that does ``action`` to the first exchange whose path ends with ``where`` and
    relays everything else."""
    done: list[bool] = []

    def plan(exchange: Exchange) -> Any:
        if exchange.path.endswith(where) and not done:
            done.append(True)
            return action
        return "relay"

    return plan


# -- the package ------------------------------------------------------------------------------


def test_importing_the_client_loads_no_server_code() -> None:
    loaded = subprocess.run(
        [sys.executable, "-c", "import sys, oh.client; print(' '.join(sorted(sys.modules)))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    roots = {module.split(".")[0] for module in loaded}
    assert "httpx" in roots
    assert roots & {"fastapi", "starlette", "uvicorn", "mcp", "pydantic"} == set()
    # Nor the library behind the package root: no storage, no keys, no SQLite, no cipher.
    ours = {module for module in loaded if module.startswith("oh.")}
    assert ours <= {"oh._version", "oh.core", "oh.core.canonical", "oh.errors"} | {
        module for module in ours if module.startswith("oh.client")
    }, ours
    assert roots & {"sqlite3", "cryptography"} == set()


def test_the_client_surface_is_exactly_all() -> None:
    exported = {
        name
        for name, value in vars(oh.client).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert exported == set(oh.client.__all__)


def _methods(cls: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(member)
        for name, member in vars(cls).items()
        if callable(member) and not name.startswith("_")
    }


def test_the_async_client_has_every_method_of_the_client_with_the_same_parameters() -> None:
    sync, concurrent = _methods(Client), _methods(AsyncClient)
    assert set(sync) == set(concurrent)
    for name, signature in sync.items():
        assert list(signature.parameters) == list(concurrent[name].parameters), name
        if name not in ("close", "events", "iter_notebooks", "with_token"):
            assert inspect.iscoroutinefunction(getattr(AsyncClient, name)), name


def test_every_method_is_documented_on_the_users_page() -> None:
    page = (ROOT / "docs" / "client.md").read_text()
    for name in _methods(Client):
        assert f"`{name}(" in page, name


def test_the_clients_body_limit_is_the_servers() -> None:
    from oh.transports.http import MAX_BODY_BYTES

    assert oh.client.MAX_BODY_BYTES == MAX_BODY_BYTES


# -- the whole flow ---------------------------------------------------------------------------


def test_the_whole_owner_and_agent_flow(served: Served, ann: Client) -> None:
    assert ann.put_document("reef-review") == {"document": "reef-review", "owner": "ann"}
    assert ann.put_document("reef-review") == {"document": "reef-review", "owner": "ann"}
    opened = ann.open_notebook("reef-review", "run-1")
    notebook = opened["notebook"]["id"]
    assert opened["notebook"]["state"] == "open"
    assert opened["mcp_url"] == f"{served.url}/mcp"
    assert opened["bootstrap"] == {
        "rows": [],
        "total": 0,
        "truncated": False,
        "version": 0,
        "revision": 0,
    }
    assert ann.open_notebook("reef-review", "run-1")["notebook"]["id"] == notebook
    agent = ann.with_token(opened["agent_token"])

    with ann.events(notebook) as cards:
        applied = agent.remember(
            notebook, [note("dataset:coral-1990-2014", "ends 2014: ruled out")], based_on=0
        )
        card = next(iter(cards))
    assert applied["status"] == "applied" and applied["version"] == 1
    assert card["kind"] == "remembered"
    assert (card["notebook"], card["names"]) == (notebook, ["dataset:coral-1990-2014"])
    assert card["panel_url"].endswith(f"/panel/notebooks/{notebook}")

    write = [note("lead:survey", "methods missing")]
    first = agent.remember(notebook, write, based_on=1, request_id="r-2")
    assert agent.remember(notebook, write, based_on=1, request_id="r-2") == first
    stale = agent.remember(notebook, [note("lead:late")], based_on=1)
    assert stale == {"status": "refused", "reason": "stale", "current_version": 2}

    answer = agent.query(notebook, "current_notes")
    assert [row["name"] for row in answer["rows"]] == ["dataset:coral-1990-2014", "lead:survey"]
    page = agent.query(notebook, "current_notes", limit=1)
    rest = agent.query(notebook, "current_notes", cursor=page["next_cursor"])
    assert [row["name"] for row in page["rows"] + rest["rows"]] == [
        row["name"] for row in answer["rows"]
    ]
    assert agent.query(notebook, "of_kind", kind="lead")["rows"][0]["name"] == "lead:survey"
    read = agent.read(notebook, "dataset:coral-1990-2014")
    assert (read["text"], read["author"], read["version"]) == (
        "ends 2014: ruled out",
        "agent:run-1",
        1,
    )
    assert agent.read(notebook, "lead:survey", digest=read["digest"])["changed"] is True
    why = agent.explain(notebook, answer["token"], 0)
    assert (why["question"], why["name"], why["path"]) == (
        "current_notes",
        "dataset:coral-1990-2014",
        ["dataset:coral-1990-2014"],
    )
    recalled = agent.recall(notebook, "coral recovery")
    assert (recalled["rows"], recalled["shadow"]) == ([], True)  # oh serve's default
    generic = agent.call_tool(notebook, "query", {"question": "changes_since", "since": 1})
    assert [row["name"] for row in generic["rows"]] == ["lead:survey"]
    assert agent.bootstrap(notebook)["total"] == 2

    records = ann.records(notebook)
    assert [n["name"] for n in records["notes"]] == ["dataset:coral-1990-2014", "lead:survey"]
    assert records["reviewed"] == []

    proposed = ann.propose(notebook=notebook, name="dataset:coral-1990-2014", source=SOURCE)
    assert proposed["created"] is True
    again = ann.propose(notebook=notebook, name="dataset:coral-1990-2014", source=SOURCE)
    assert again == {"proposal_id": proposed["proposal_id"], "created": False}
    decided = ann.decide(proposed["proposal_id"], "accept", "checked the table")
    assert (decided["state"], decided["revision"]) == ("accepted", 1)
    with pytest.raises(AlreadyExists) as twice:
        ann.decide(proposed["proposal_id"], "accept", "again")
    assert twice.value.code == "already_exists"
    new = ann.propose(record={"name": "finding:slow", "text": "ten years"}, source=SOURCE)
    rejected = ann.decide(new["proposal_id"], "reject", "one survey only")
    assert rejected == {"proposal_id": new["proposal_id"], "state": "rejected"}
    knowledge = ann.knowledge()
    assert (knowledge["revision"], knowledge["latest"]) == (1, 1)
    assert [r["name"] for r in knowledge["records"]] == ["dataset:coral-1990-2014"]
    assert knowledge["records"][0]["decision"]["reason"] == "checked the table"
    assert ann.knowledge(revision=0)["records"] == []

    forgot = ann.forget_note(notebook, "lead:survey")
    assert forgot == {"notebook": notebook, "version": 3, "removed": "lead:survey"}
    assert agent.remember(notebook, [note("lead:x")], based_on=2)["status"] == "refused"

    listed = ann.list_notebooks(document="reef-review")
    assert [n["id"] for n in listed["notebooks"]] == [notebook]
    assert listed["notebooks"][0]["run"] == "run-1" and listed["next_cursor"] is None
    forgotten = ann.forget_notebook(notebook)
    assert forgotten["notebook"] == notebook and forgotten["removed"]
    assert ann.get_notebook(notebook)["state"] == "purged"
    with pytest.raises(Purged):
        agent.remember(notebook, write, based_on=1, request_id="r-2")
    with pytest.raises(Purged):
        ann.open_notebook("reef-review", "run-1")
    with pytest.raises(Purged):
        ann.forget_notebook(notebook)

    health = ann.healthz()
    assert (health["status"], health["version"]) == ("ok", __version__)
    assert health["purge"]["every"] == 60.0  # oh serve runs the purge worker beside it
    assert "oh_tool_calls_total" in ann.metrics()
    assert "/v1/notebooks/{notebook_id}/tools/remember" in ann.openapi()["paths"]


def test_iter_notebooks_follows_every_cursor(ann: Client, bob: Client) -> None:
    mine = [_opened(ann, "iterated-doc", f"run-{i}")[0] for i in range(5)]
    _opened(bob, "bobs-iterated-doc")
    walked = [n["id"] for n in ann.iter_notebooks(document="iterated-doc", page_size=2)]
    assert walked == [n["id"] for n in ann.list_notebooks(document="iterated-doc")["notebooks"]]
    assert sorted(walked) == sorted(mine)
    assert [n["id"] for n in ann.iter_notebooks(document="bobs-iterated-doc")] == []
    assert len(list(ann.iter_notebooks(state="open", page_size=1))) >= 5


def test_the_whole_flow_with_the_async_client(served: Served) -> None:
    token = served.owner_token("ann")

    async def scenario() -> None:
        async with AsyncClient(served.url, token, retry=FAST) as owner:
            assert (await owner.put_document("async-doc"))["owner"] == "ann"
            opened = await owner.open_notebook("async-doc", "run-1", pin=0)
            notebook = opened["notebook"]["id"]
            agent = owner.with_token(opened["agent_token"])
            async with owner.events(notebook) as cards:
                applied = await agent.remember(notebook, [note("lead:async")], based_on=0)
                card = await anext(aiter(cards))
            assert applied["status"] == "applied"
            assert (card["kind"], card["names"]) == ("remembered", ["lead:async"])
            stale = await agent.remember(notebook, [note("lead:other")], based_on=0)
            assert stale == {"status": "refused", "reason": "stale", "current_version": 1}
            answer = await agent.query(notebook, "current_notes")
            assert [row["name"] for row in answer["rows"]] == ["lead:async"]
            assert (await agent.read(notebook, "lead:async"))["version"] == 1
            assert (await agent.explain(notebook, answer["token"], 0))["name"] == "lead:async"
            assert (await agent.recall(notebook, "async"))["shadow"] is True
            assert (await agent.bootstrap(notebook))["total"] == 1
            generic = await agent.call_tool(notebook, "read", {"name": "lead:async"})
            assert generic["text"] == "a working note"
            assert [n["name"] for n in (await owner.records(notebook))["notes"]] == ["lead:async"]
            proposed = await owner.propose(notebook=notebook, name="lead:async", source=SOURCE)
            decided = await owner.decide(proposed["proposal_id"], "accept", "fine")
            reviewed = (await owner.knowledge(revision=decided["revision"]))["records"]
            assert "lead:async" in [record["name"] for record in reviewed]
            listed = [n["id"] async for n in owner.iter_notebooks(document="async-doc")]
            assert listed == [notebook]
            page = await owner.list_notebooks(document="async-doc", limit=1)
            assert page["next_cursor"] is None
            assert (await owner.forget_note(notebook, "lead:async"))["version"] == 2
            assert (await owner.get_notebook(notebook))["version"] == 2
            assert (await owner.forget_notebook(notebook))["notebook"] == notebook
            with pytest.raises(Purged) as purged:
                await agent.query(notebook, "current_notes")
            assert purged.value.code == "purged"
            assert (await owner.delete_document("async-doc"))["forgotten_notebooks"] == 0
            assert (await owner.healthz())["status"] == "ok"
            assert "oh_tool_calls_total" in await owner.metrics()
            assert "paths" in await owner.openapi()

    asyncio.run(scenario())


# -- errors -----------------------------------------------------------------------------------


def test_every_error_a_user_can_cause_is_raised_as_its_class_with_its_code(
    served: Served, ann: Client, bob: Client
) -> None:
    notebook, agent = _opened(ann, "errors-doc")
    agent.remember(notebook, [note("lead:here")], based_on=0, request_id="taken")
    _, other_agent = _opened(bob, "bobs-errors-doc")
    gone, gone_agent = _opened(ann, "errors-doc", "run-gone")
    ann.forget_notebook(gone)
    proposal = ann.propose(record={"name": "finding:decided", "text": "t"}, source=SOURCE)
    ann.decide(proposal["proposal_id"], "reject", "no")

    cases: list[tuple[str, Callable[[], Any], type[OhError], dict[str, Any]]] = [
        ("no changes", lambda: agent.remember(notebook, [], based_on=1), InvalidArgument, {}),
        (
            "65 changes",
            lambda: agent.remember(notebook, [note(f"lead:n{i}") for i in range(65)], based_on=1),
            TooManyChanges,
            {"limit": 64},
        ),
        ("a bad name", lambda: agent.read(notebook, "NotAName"), InvalidArgument, {}),
        ("a bad limit", lambda: ann.list_notebooks(limit=0), InvalidArgument, {}),
        ("a bad cursor", lambda: ann.list_notebooks(cursor="nope"), InvalidArgument, {}),
        ("a bad state", lambda: ann.list_notebooks(state="closed"), InvalidArgument, {}),
        ("a blank reason", lambda: ann.decide("pr_x", "accept", "  "), InvalidArgument, {}),
        ("a bad proposal", lambda: ann.propose(source={}), InvalidArgument, {}),
        ("off the menu", lambda: agent.query(notebook, "gossip"), UnknownQuestion, {}),
        ("a forged token", lambda: agent.explain(notebook, "a.b", 0), TokenInvalid, {}),
        ("no token", lambda: Client(served.url).records(notebook), Unauthenticated, {}),
        (
            "an unknown token",
            lambda: Client(served.url, "oho_not-a-token").get_notebook(notebook),
            Unauthenticated,
            {},
        ),
        ("an agent on owner routes", lambda: agent.get_notebook(notebook), Unauthenticated, {}),
        ("an owner on the tools", lambda: ann.bootstrap(notebook), Unauthenticated, {}),
        ("another's document", lambda: bob.put_document("errors-doc"), Forbidden, {}),
        ("another notebook's agent", lambda: other_agent.bootstrap(notebook), Forbidden, {}),
        ("another's notebook", lambda: bob.get_notebook(notebook), NotFound, {}),
        ("no such notebook", lambda: ann.records("nb_missing"), NotFound, {}),
        ("no such note", lambda: agent.read(notebook, "lead:none"), NotFound, {}),
        ("forget a missing note", lambda: ann.forget_note(notebook, "lead:none"), NotFound, {}),
        ("no such revision", lambda: ann.knowledge(revision=99), NotFound, {}),
        ("no such proposal", lambda: ann.decide("pr_missing", "reject", "no"), NotFound, {}),
        ("no such tool", lambda: agent.call_tool(notebook, "gossip", {}), NotFound, {}),
        ("unregistered", lambda: ann.open_notebook("never-put", "run-1"), NotFound, {}),
        (
            "an add of a current note",
            lambda: agent.remember(notebook, [note("lead:here")], based_on=1),
            AlreadyExists,
            {},
        ),
        (
            "a second decision",
            lambda: ann.decide(proposal["proposal_id"], "accept", "after all"),
            AlreadyExists,
            {},
        ),
        (
            "a request id reused",
            lambda: agent.remember(notebook, [note("lead:else")], based_on=1, request_id="taken"),
            RequestIdReused,
            {},
        ),
        ("a forgotten notebook", lambda: gone_agent.bootstrap(gone), Purged, {}),
        ("forgotten twice", lambda: ann.forget_notebook(gone), Purged, {}),
    ]
    for label, call, expected, details in cases:
        with pytest.raises(OhError) as raised:
            call()
        error = raised.value
        assert type(error) is expected, (label, error)
        assert error.code == expected.code and error.http_status == HTTP_STATUS[expected.code]
        assert details.items() <= error.details.items(), (label, error.details)
    with pytest.raises(UnknownQuestion) as unknown:
        agent.query(notebook, "gossip")
    assert "current_notes" in unknown.value.details["menu"]
    # None of it changed the notebook.
    assert ann.get_notebook(notebook)["version"] == 1
    assert [entry["request_id"] for entry in _log(served, notebook)] == ["taken"]


def _clock_ahead(directory: Path, **ahead: float) -> dict[str, str]:
    """The environment of an ``oh serve`` whose clock runs ``ahead`` (timedelta keywords) of
    this session's, through a ``sitecustomize`` of its own (the clock-shift mechanism of
    tests/clock_shift, with a finer step). The session's own shift, if any, is kept."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sitecustomize.py").write_text(
        "import datetime, os, time_machine\n"
        "_days = int(os.environ.get('OH_CLOCK_SHIFT_DAYS') or 0)\n"
        f"_ahead = datetime.timedelta(days=_days) + datetime.timedelta(**{ahead!r})\n"
        "time_machine.travel(_ahead, tick=True).start()\n"
    )
    return {"PYTHONPATH": str(directory)}


def test_expired_notebooks_and_tokens_raise_their_classes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with Served(data) as first:
        token = first.owner_token("ann")
        with Client(first.url, token) as owner:
            notebook, agent = _opened(owner, "clock-doc")
            agent.remember(notebook, [note("lead:a")], based_on=0)
            answer_token = agent.query(notebook, "current_notes")["token"]
            agent_token = agent.token
    # An hour later the notebook is open and the query's token (10 minutes) has expired.
    with (
        Served(data, env=_clock_ahead(tmp_path / "hour", hours=1)) as later,
        Client(later.url, agent_token) as agent,
    ):
        with pytest.raises(TokenExpired) as expired_token:
            agent.explain(notebook, answer_token, 0)
        assert expired_token.value.code == "token_expired"
        assert agent.query(notebook, "current_notes")["rows"][0]["name"] == "lead:a"
    # Two days later the notebook is past its forget time (24 hours) and waits for the purge.
    with (
        Served(data, env=_clock_ahead(tmp_path / "days", days=2)) as much_later,
        Client(much_later.url, agent_token) as agent,
        Client(much_later.url, token) as owner,
    ):
        with pytest.raises(Expired) as expired:
            agent.remember(notebook, [note("lead:b")], based_on=1)
        assert (expired.value.code, expired.value.http_status) == ("expired", 410)
        assert owner.get_notebook(notebook)["state"] == "expired"
        with pytest.raises(Expired):
            owner.forget_note(notebook, "lead:a")


def test_every_code_in_an_answer_becomes_its_class_with_its_details(
    ann: Client, proxy_of: Callable[[Plan], Proxy]
) -> None:
    """Codes a client never causes itself (a wrong method, a body not sent as JSON, damaged
    stored data) still arrive as their classes when some server answers them."""
    for code, status in HTTP_STATUS.items():
        body = json.dumps({"error": {"code": code, "message": "said so", "extra": [1]}}).encode()
        proxy = proxy_of(always(("answer", status, body)))
        with pytest.raises(OhError) as raised:
            Client(proxy.url, retry=FAST).healthz()
        expected = type(error_for_code(code, "said so"))
        assert type(raised.value) is expected and raised.value.code == code
        assert (raised.value.message, raised.value.details) == ("said so", {"extra": [1]})
        retried = 3 if code == "storage_unavailable" else 1
        assert len(proxy.seen) == retried, code


# -- retries ----------------------------------------------------------------------------------


def test_a_remember_whose_answer_is_lost_is_retried_with_its_request_id_and_applied_once(
    served: Served, ann: Client, proxy_of: Callable[[Plan], Proxy]
) -> None:
    notebook, agent = _opened(ann, "lost-answer-doc")
    proxy = proxy_of(once("drop", "/tools/remember"))
    with Client(proxy.url, agent.token, retry=FAST) as through:
        result = through.remember(notebook, [note("lead:once")], based_on=0)
    assert result["status"] == "applied" and result["version"] == 1
    sent = proxy.calls("/tools/remember")
    assert len(sent) == 2 and sent[0].body == sent[1].body
    request_id = sent[0].json["request_id"]
    assert request_id.startswith("oh-client-")
    assert ann.get_notebook(notebook)["version"] == 1
    log = _log(served, notebook)
    assert [(entry["version"], entry["request_id"]) for entry in log] == [(1, request_id)]
    assert [change["name"] for change in log[0]["changes"]] == ["lead:once"]


def test_a_remember_that_timed_out_is_retried_by_the_async_client_and_applied_once(
    served: Served, ann: Client, proxy_of: Callable[[Plan], Proxy]
) -> None:
    notebook, agent = _opened(ann, "timed-out-doc")
    proxy = proxy_of(once(("late", 1.5), "/tools/remember"))

    async def scenario() -> Any:
        async with AsyncClient(proxy.url, agent.token, timeout=0.5, retry=FAST) as through:
            return await through.remember(
                notebook, [note("lead:slow")], based_on=0, request_id="mine-1"
            )

    result = asyncio.run(scenario())
    assert (result["status"], result["version"]) == ("applied", 1)
    sent = proxy.calls("/tools/remember")
    assert [exchange.json["request_id"] for exchange in sent] == ["mine-1", "mine-1"]
    assert [entry["request_id"] for entry in _log(served, notebook)] == ["mine-1"]


def test_a_call_tool_remember_gets_a_request_id_that_its_retries_keep(
    served: Served, ann: Client, proxy_of: Callable[[Plan], Proxy]
) -> None:
    notebook, agent = _opened(ann, "generic-retry-doc")
    proxy = proxy_of(once("drop", "/tools/remember"))
    arguments = {"based_on": 0, "changes": [note("lead:generic")]}
    with Client(proxy.url, agent.token, retry=FAST) as through:
        result = through.call_tool(notebook, "remember", arguments)
    assert result["status"] == "applied"
    assert "request_id" not in arguments  # the caller's dict is left as it was
    ids = {exchange.json["request_id"] for exchange in proxy.calls("/tools/remember")}
    assert len(ids) == 1 and len(proxy.calls("/tools/remember")) == 2
    assert len(_log(served, notebook)) == 1


def test_a_proxys_html_502_is_storage_unavailable_and_only_safe_calls_are_retried(
    served: Served, ann: Client, proxy_of: Callable[[Plan], Proxy]
) -> None:
    notebook, agent = _opened(ann, "html-502-doc")
    proxy = proxy_of(always("html502"))
    owner = Client(proxy.url, ann.token, retry=FAST)
    through = Client(proxy.url, agent.token, retry=FAST)
    with pytest.raises(StorageUnavailable) as raised:
        owner.get_notebook(notebook)
    assert raised.value.code == "storage_unavailable"
    assert raised.value.details == {"status": 502}
    assert raised.value.__cause__ is None
    with pytest.raises(StorageUnavailable):
        through.remember(notebook, [note("lead:never")], based_on=0)
    with pytest.raises(StorageUnavailable):
        owner.decide("pr_x", "reject", "no")
    with pytest.raises(StorageUnavailable):
        owner.forget_notebook(notebook)
    assert len(proxy.calls(f"/v1/notebooks/{notebook}")) == 3 + 1  # GET thrice, DELETE once
    remembers = proxy.calls("/tools/remember")
    assert len(remembers) == 3 and len({e.json["request_id"] for e in remembers}) == 1
    assert len(proxy.calls("/decision")) == 1
    assert ann.get_notebook(notebook)["version"] == 0  # nothing got through


def test_a_cut_body_is_storage_unavailable_and_a_safe_call_is_tried_again(
    ann: Client, proxy_of: Callable[[Plan], Proxy]
) -> None:
    notebook, _ = _opened(ann, "cut-body-doc")
    proxy = proxy_of(once("truncate", f"/v1/notebooks/{notebook}"))
    with Client(proxy.url, ann.token, retry=FAST) as owner:
        assert owner.get_notebook(notebook)["id"] == notebook
    assert len(proxy.seen) == 2
    cutting = proxy_of(always("truncate"))
    with Client(cutting.url, ann.token, retry=FAST) as owner:
        with pytest.raises(StorageUnavailable) as raised:
            owner.get_notebook(notebook)
        assert isinstance(raised.value.__cause__, httpx.TransportError)
        with pytest.raises(StorageUnavailable):
            owner.forget_notebook(notebook)  # not resent: it may have been done
    assert len(cutting.seen) == 3 + 1
    assert ann.get_notebook(notebook)["state"] == "purged"  # the DELETE did reach the server


def test_an_error_oh_answered_is_never_retried(
    ann: Client, proxy_of: Callable[[Plan], Proxy]
) -> None:
    notebook, agent = _opened(ann, "no-retry-doc")
    proxy = proxy_of(always("relay"))
    through = Client(proxy.url, agent.token, retry=FAST)
    through.remember(notebook, [note("lead:a")], based_on=0, request_id="one")
    for call, expected in (
        (lambda: through.remember(notebook, [note("lead:b")], based_on=1, request_id="one"),
         RequestIdReused),
        (lambda: through.read(notebook, "lead:none"), NotFound),
        (lambda: through.query(notebook, "gossip"), UnknownQuestion),
    ):  # fmt: skip
        before = len(proxy.seen)
        with pytest.raises(expected):
            call()
        assert len(proxy.seen) == before + 1


def test_no_server_is_storage_unavailable_after_the_bounded_tries() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    tries: list[httpx.Request] = []
    with httpx.Client(event_hooks={"request": [tries.append]}) as http:
        client = Client(f"http://127.0.0.1:{port}", "oho_x", retry=FAST, http=http)
        with pytest.raises(StorageUnavailable) as raised:
            client.decide("pr_x", "reject", "no")  # never sent, so safe to try again
        assert isinstance(raised.value.__cause__, httpx.ConnectError)
        assert len(tries) == 3
        with pytest.raises(StorageUnavailable):
            Client(f"http://127.0.0.1:{port}", retry=Retry(attempts=1), http=http).healthz()
        assert len(tries) == 4


def test_the_retry_policy_is_bounded() -> None:
    policy = Retry(attempts=5, backoff=0.1, max_backoff=0.3)
    delays = [policy.delay(attempt) for attempt in range(1, 5)]
    assert all(0.05 <= delay <= 0.3 for delay in delays)
    assert 0.15 <= policy.delay(10) <= 0.3
    for bad in ({"attempts": 0}, {"attempts": 1.5}, {"backoff": -1}, {"backoff": 3.0}):
        with pytest.raises(InvalidArgument):
            Retry(**bad)


# -- hostile input ----------------------------------------------------------------------------


class Opaque:
    pass


def test_hostile_input_is_a_typed_error_and_changes_nothing(
    served: Served, ann: Client, proxy_of: Callable[[Plan], Proxy]
) -> None:
    notebook, agent = _opened(ann, "hostile-doc")
    agent.remember(notebook, [note("lead:kept")], based_on=0)
    proxy = proxy_of(always("relay"))
    through = Client(proxy.url, agent.token, retry=FAST)
    owner = Client(proxy.url, ann.token, retry=FAST)
    deep: list[Any] = []
    for _ in range(100_000):
        deep = [deep]

    def fields(value: Any) -> Callable[[], Any]:
        record = {"name": "lead:hostile", "text": "t", "fields": {"value": value}}
        return lambda: through.remember(notebook, [{"op": "add", "record": record}], based_on=1)

    refused_here: list[Callable[[], Any]] = [
        fields(float("nan")),
        fields(float("inf")),
        fields({1, 2}),
        fields(Opaque()),
        fields(b"bytes"),
        fields({1: "an integer key"}),
        fields(2**60),
        fields(deep),
        fields("\ud800"),
        fields("x" * 2_000_000),
        lambda: through.remember(notebook, [note("lead:a")], based_on=float("nan")),  # type: ignore[arg-type]
        lambda: through.call_tool(notebook, "remember", Opaque()),
        lambda: through.read(notebook, "lead:a", digest=Opaque()),  # type: ignore[arg-type]
        lambda: owner.forget_note(notebook, "lead:a/../.."),
        lambda: owner.forget_note(notebook, ""),
        lambda: owner.put_document("a/b"),
        lambda: owner.get_notebook(42),  # type: ignore[arg-type]
        lambda: owner.list_notebooks(limit="5"),  # type: ignore[arg-type]
        lambda: owner.knowledge(revision=True),
        lambda: owner.propose(source=SOURCE, record={"name": "finding:x", "text": float("nan")}),
    ]
    for call in refused_here:
        with pytest.raises(InvalidArgument) as raised:
            call()
        assert raised.value.code == "invalid_argument"
    assert proxy.seen == []  # refused before anything was sent

    refused_there: list[Callable[[], Any]] = [
        lambda: through.remember(notebook, "not a list", based_on=1),  # type: ignore[arg-type]
        lambda: through.remember(notebook, [note("lead:a")], based_on=-1),
        lambda: through.remember(notebook, [note("lead:a")], based_on=1, request_id="a\x00b"),
        lambda: through.call_tool(notebook, "query", [1, 2]),
        lambda: through.query(notebook, "current_notes", limit=10**6),
        lambda: owner.forget_note(notebook, ".."),  # escaped: not the notebook's own path
        lambda: owner.forget_note(notebook, "."),
        lambda: owner.open_notebook("hostile-doc", "run\n2"),
    ]
    for call in refused_there:
        with pytest.raises(InvalidArgument):
            call()
    assert len(proxy.seen) == len(refused_there)
    assert ann.get_notebook(notebook)["state"] == "open"
    assert ann.get_notebook(notebook)["version"] == 1
    assert [n["name"] for n in ann.records(notebook)["notes"]] == ["lead:kept"]
    assert len(_log(served, notebook)) == 1


def test_a_bad_url_or_token_is_refused_before_anything_is_sent(served: Served) -> None:
    for url in ("nonsense", "ftp://127.0.0.1/", "http://", 8765, f"{served.url}?a=1"):
        with pytest.raises(InvalidArgument):
            Client(url)  # type: ignore[arg-type]
    for token in ("oho_a b", "oho_\n", "", "oho_é", 42):
        with pytest.raises(InvalidArgument):
            Client(served.url, token)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgument):
        Client(served.url, http=httpx.Client(), transport=httpx.HTTPTransport())
    assert Client(served.url + "/").healthz()["status"] == "ok"


# -- hosts that bring their own httpx ---------------------------------------------------------


def test_a_host_brings_its_own_httpx_client_or_transport(served: Served, ann: Client) -> None:
    notebook, agent = _opened(ann, "own-http-doc")
    seen: list[str] = []
    with httpx.Client(event_hooks={"request": [lambda r: seen.append(r.url.path)]}) as http:
        with Client(served.url, agent.token, http=http) as client:
            assert client.bootstrap(notebook)["version"] == 0
        assert seen == [f"/v1/notebooks/{notebook}/bootstrap"]
        assert not http.is_closed  # the client never closes what it was given
    with Client(served.url, ann.token, transport=httpx.HTTPTransport(retries=0)) as client:
        assert client.get_notebook(notebook)["id"] == notebook

    async def scenario() -> None:
        async with httpx.AsyncClient() as http:
            async with AsyncClient(served.url, agent.token, http=http) as client:
                assert (await client.bootstrap(notebook))["version"] == 0
            assert not http.is_closed
        async with AsyncClient(served.url, transport=httpx.AsyncHTTPTransport()) as client:
            assert (await client.healthz())["status"] == "ok"

    asyncio.run(scenario())
