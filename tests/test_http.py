"""`oh serve` as a real process on 127.0.0.1, driven over HTTP like a host's users and agents
would: the flows of docs/http.md through the Python client (`oh.client`), and, in raw HTTP, what
only raw HTTP can check (statuses, headers, malformed bodies) and an authorization matrix where
every denial is typed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import oh.client
from oh.errors import AlreadyExists, Forbidden, InvalidArgument, NotFound, Purged
from oh.host import bearer_token
from oh.testing.served import Served

SOURCE = {
    "document": "hughes-2018.pdf",
    "passage": "Recovery took at least 10 years.",
    "locator": "p. 4",
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served(tmp_path_factory.mktemp("oh-serve") / "data") as running:
        yield running


def auth(token: str | None) -> dict[str, str]:
    return {} if token is None else {"Authorization": f"Bearer {token}"}


class Client:
    def __init__(self, server: Served, token: str | None) -> None:
        self.http = httpx.Client(base_url=server.url, headers=auth(token), timeout=10)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.http, name)


@pytest.fixture(scope="module")
def ann(server: Served) -> Client:
    return Client(server, server.owner_token("ann"))


@pytest.fixture(scope="module")
def bob(server: Served) -> Client:
    return Client(server, server.owner_token("bob"))


@pytest.fixture(scope="module")
def oh_ann(server: Served, ann: Client) -> Iterator[oh.client.Client]:
    """ann through the Python client, with the same token as the raw ``ann``."""
    with oh.client.Client(server.url, ann.http.headers["authorization"][7:]) as client:
        yield client


@pytest.fixture(scope="module")
def oh_bob(server: Served, bob: Client) -> Iterator[oh.client.Client]:
    with oh.client.Client(server.url, bob.http.headers["authorization"][7:]) as client:
        yield client


def _open(owner: Client, document: str, run: str) -> dict[str, Any]:
    owner.put(f"/v1/documents/{document}")
    answer = owner.post(f"/v1/documents/{document}/notebooks", json={"run": run})
    assert answer.status_code in (200, 201), answer.text
    return dict(answer.json())


@pytest.mark.parametrize(
    ("header", "token"),
    [
        ("Bearer oho_abc", "oho_abc"),
        ("bearer oho_abc", "oho_abc"),
        ("BEARER   oho_abc  ", "oho_abc"),
        ("Bearer oho_a b", "oho_a b"),  # stripped at the ends only; the host then refuses it
        (None, None),
        ("", None),
        ("Bearer", None),
        ("Bearer    ", None),
        ("Bearer\toho_abc", None),
        ("Beareroho_abc", None),
        ("Basic YW5uOnB3", None),
        ("Token oho_abc", None),
    ],
)
def test_a_bearer_header_carries_its_token_whatever_the_scheme_case(
    header: str | None, token: str | None
) -> None:
    assert bearer_token({} if header is None else {"authorization": header}) == token


def test_over_http_the_scheme_is_read_in_any_case_and_nothing_else_authenticates(
    server: Served, ann: Client
) -> None:
    token = ann.http.headers["authorization"].partition(" ")[2]
    notebook = _open(ann, "scheme-case.pdf", "run-1")["notebook"]["id"]
    path = f"{server.url}/v1/notebooks/{notebook}"
    for header in (f"bearer {token}", f"BEARER   {token}"):
        assert httpx.get(path, headers={"Authorization": header}).status_code == 200
    for header in (f"Basic {token}", "Bearer", f"Bearer{token}", f"Token {token}"):
        answer = httpx.get(path, headers={"Authorization": header})
        assert answer.status_code == 401, header
        assert answer.json()["error"]["code"] == "unauthenticated"


def test_the_whole_flow_over_http(server: Served, oh_ann: oh.client.Client) -> None:
    assert oh_ann.put_document("reef-review") == {"document": "reef-review", "owner": "ann"}
    opened = oh_ann.open_notebook("reef-review", "run-1")
    notebook_id = opened["notebook"]["id"]
    assert opened["notebook"]["state"] == "open"
    assert opened["mcp_url"] == f"{server.url}/mcp"
    assert opened["bootstrap"] == {
        "rows": [],
        "total": 0,
        "truncated": False,
        "version": 0,
        "revision": 0,
    }
    assert oh_ann.open_notebook("reef-review", "run-1")["notebook"]["id"] == notebook_id

    agent = oh_ann.with_token(opened["agent_token"])
    changes = [
        {"op": "add", "record": {"name": "dataset:coral-1990-2014", "text": "ends 2014: ruled out"}}
    ]
    applied = agent.remember(notebook_id, changes, based_on=0, request_id="r-12")
    assert applied["status"] == "applied"
    assert agent.remember(notebook_id, changes, based_on=0, request_id="r-12") == applied
    stale = agent.remember(notebook_id, changes, based_on=0, request_id="r-13")
    assert stale == {"status": "refused", "reason": "stale", "current_version": 1}

    query = agent.query(notebook_id, "current_notes")
    assert [row["name"] for row in query["rows"]] == ["dataset:coral-1990-2014"]
    read = agent.read(notebook_id, "dataset:coral-1990-2014")
    assert read["text"] == "ends 2014: ruled out"
    assert read["author"] == "agent:run-1"
    assert agent.explain(notebook_id, query["token"], 0)["question"] == "current_notes"
    assert agent.bootstrap(notebook_id)["total"] == 1

    records = oh_ann.records(notebook_id)
    assert [note["name"] for note in records["notes"]] == ["dataset:coral-1990-2014"]

    proposal = oh_ann.propose(notebook=notebook_id, name="dataset:coral-1990-2014", source=SOURCE)
    assert proposal["created"] is True
    decided = oh_ann.decide(proposal["proposal_id"], "accept", "checked the table")
    assert decided["revision"] == 1
    with pytest.raises(AlreadyExists):
        oh_ann.decide(proposal["proposal_id"], "accept", "again")
    knowledge = oh_ann.knowledge()
    assert (knowledge["latest"], [r["name"] for r in knowledge["records"]]) == (
        1,
        ["dataset:coral-1990-2014"],
    )
    assert oh_ann.knowledge(revision=0)["records"] == []

    forgotten = oh_ann.forget_notebook(notebook_id)
    assert forgotten["removed"]["records"] == 1
    with pytest.raises(Purged):
        agent.remember(notebook_id, changes, based_on=1, request_id="r-14")
    with pytest.raises(Purged):
        agent.remember(notebook_id, changes, based_on=0, request_id="r-12")  # even a retry
    with pytest.raises(Purged):
        oh_ann.open_notebook("reef-review", "run-1")
    assert oh_ann.get_notebook(notebook_id)["state"] == "purged"


def test_each_route_answers_its_status(server: Served, ann: Client) -> None:
    """What the client does not show: 201 for what is new, 200 for what was there already, and
    each error with its code's status."""
    assert ann.put("/v1/documents/status-doc").status_code == 201
    assert ann.put("/v1/documents/status-doc").status_code == 200
    opened = ann.post("/v1/documents/status-doc/notebooks", json={"run": "run-1"})
    again = ann.post("/v1/documents/status-doc/notebooks", json={"run": "run-1"})
    assert (opened.status_code, again.status_code) == (201, 200)
    notebook_id = opened.json()["notebook"]["id"]
    agent = Client(server, opened.json()["agent_token"])
    write = {
        "based_on": 0,
        "request_id": "r-1",
        "changes": [{"op": "add", "record": {"name": "lead:status", "text": "t"}}],
    }
    tools = f"/v1/notebooks/{notebook_id}/tools"
    assert agent.post(f"{tools}/remember", json=write).status_code == 200
    stale = agent.post(f"{tools}/remember", json={**write, "request_id": "r-2"})
    assert (stale.status_code, stale.json()["status"]) == (200, "refused")
    note = {"notebook": notebook_id, "name": "lead:status", "source": SOURCE}
    first = ann.post("/v1/knowledge/proposals", json=note)
    assert (first.status_code, ann.post("/v1/knowledge/proposals", json=note).status_code) == (
        201,
        200,
    )
    decision = f"/v1/knowledge/proposals/{first.json()['proposal_id']}/decision"
    assert ann.post(decision, json={"decision": "reject", "reason": "no"}).status_code == 200
    twice = ann.post(decision, json={"decision": "accept", "reason": "again"})
    assert (twice.status_code, twice.json()["error"]["code"]) == (409, "already_exists")
    assert ann.delete(f"/v1/notebooks/{notebook_id}").status_code == 200
    for answer in (
        agent.post(f"{tools}/remember", json=write),
        ann.post("/v1/documents/status-doc/notebooks", json={"run": "run-1"}),
        ann.delete(f"/v1/notebooks/{notebook_id}"),
    ):
        assert (answer.status_code, answer.json()["error"]["code"]) == (410, "purged")


def test_removing_a_document_closes_its_notebooks(oh_ann: oh.client.Client) -> None:
    oh_ann.put_document("doc-to-remove")
    opened = oh_ann.open_notebook("doc-to-remove", "run-1")
    notebook_id, agent = opened["notebook"]["id"], oh_ann.with_token(opened["agent_token"])
    assert agent.query(notebook_id, "current_notes")["question"] == "current_notes"
    assert oh_ann.delete_document("doc-to-remove") == {
        "document": "doc-to-remove",
        "forgotten_notebooks": 1,
    }
    with pytest.raises(Forbidden):
        agent.query(notebook_id, "current_notes")


def test_bad_input_is_typed_and_never_a_500(server: Served, ann: Client) -> None:
    opened = _open(ann, "doc-bad-input", "run-1")
    agent = Client(server, opened["agent_token"])
    tools = f"/v1/notebooks/{opened['notebook']['id']}/tools"
    cases = [
        b"",
        b"{",
        b"[1,2]",
        b'{"question": "current_notes", "question": "conflicts"}',
        b'{"question": NaN}',
        b'{"question": "\\ud800"}',
        b"\xff\xfe",
        b"null",
        b'{"question": "current_notes", "sql": "DROP TABLE records"}',
    ]
    for raw in cases:
        answer = agent.post(
            f"{tools}/query", content=raw, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 400, (raw, answer.text)
        assert answer.json()["error"]["code"] in ("invalid_argument", "unknown_question")
    huge = agent.post(
        f"{tools}/remember",
        content=b"[" + b"1," * 600_000 + b"1]",
        headers={"content-type": "application/json"},
    )
    assert (huge.status_code, huge.json()["error"]["code"]) == (400, "invalid_argument")
    assert ann.get("/v1/no-such-route").json()["error"]["code"] == "not_found"
    assert ann.get("/v1/knowledge?revision=x").json()["error"]["code"] == "invalid_argument"
    assert ann.get("/v1/knowledge?revision=99").json()["error"]["code"] == "not_found"


def test_a_note_proposed_twice_while_pending_answers_the_pending_proposal(
    oh_ann: oh.client.Client,
) -> None:
    oh_ann.put_document("twice-doc")
    opened = oh_ann.open_notebook("twice-doc", "run-1")
    notebook_id = opened["notebook"]["id"]
    oh_ann.with_token(opened["agent_token"]).remember(
        notebook_id,
        [{"op": "add", "record": {"name": "lead:twice", "text": "methods gone"}}],
        based_on=0,
    )
    first = oh_ann.propose(notebook=notebook_id, name="lead:twice", source=SOURCE)
    again = oh_ann.propose(notebook=notebook_id, name="lead:twice", source=SOURCE)
    assert (first["created"], again) == (True, {**first, "created": False})
    with pytest.raises(AlreadyExists) as other:
        oh_ann.propose(
            notebook=notebook_id, name="lead:twice", source={**SOURCE, "locator": "p. 9"}
        )
    assert other.value.details["proposal_id"] == first["proposal_id"]


def test_accepting_a_record_with_empty_text_is_invalid_and_changes_nothing(
    oh_ann: oh.client.Client,
) -> None:
    with pytest.raises(InvalidArgument):
        oh_ann.propose(record={"name": "finding:blank", "text": "  "}, source=SOURCE)
    made = oh_ann.propose(record={"name": "finding:cleared", "text": "ten years"}, source=SOURCE)
    before = oh_ann.knowledge()["latest"]
    for text in ("", " \n "):
        with pytest.raises(InvalidArgument):
            oh_ann.decide(
                made["proposal_id"],
                "accept",
                "cleared it",
                record={"name": "finding:cleared", "text": text},
            )
    assert oh_ann.knowledge()["latest"] == before
    accepted = oh_ann.decide(made["proposal_id"], "accept", "as proposed")
    assert accepted["revision"] == before + 1


def test_operations_routes(server: Served, ann: Client) -> None:
    assert httpx.get(f"{server.url}/healthz").json()["status"] == "ok"
    spec = httpx.get(f"{server.url}/openapi.json").json()
    paths = spec["paths"]
    for path in (
        "/v1/documents/{document}",
        "/v1/documents/{document}/notebooks",
        "/v1/notebooks/{notebook_id}",
        "/v1/notebooks/{notebook_id}/records",
        "/v1/notebooks/{notebook_id}/bootstrap",
        "/v1/knowledge",
        "/v1/knowledge/proposals",
        "/v1/knowledge/proposals/{proposal_id}/decision",
        *(
            f"/v1/notebooks/{{notebook_id}}/tools/{tool}"
            for tool in ("remember", "query", "read", "explain", "recall")
        ),
    ):
        assert path in paths, path
    remember = paths["/v1/notebooks/{notebook_id}/tools/remember"]["post"]
    assert "requestBody" in remember
    assert "200" in remember["responses"]
    metrics = httpx.get(f"{server.url}/metrics").text
    assert "oh_tool_calls_total" in metrics


# -- the authorization matrix ----------------------------------------------------------------

ROUTES: list[tuple[str, str, Any]] = [
    ("get", "/v1/notebooks/{id}", None),
    ("delete", "/v1/notebooks/{id}", None),
    ("get", "/v1/notebooks/{id}/records", None),
    ("get", "/v1/notebooks/{id}/bootstrap", None),
    (
        "post",
        "/v1/notebooks/{id}/tools/remember",
        {
            "based_on": 0,
            "request_id": "m",
            "changes": [{"op": "add", "record": {"name": "note:x", "text": "x"}}],
        },
    ),
    ("post", "/v1/notebooks/{id}/tools/query", {"question": "current_notes"}),
    ("post", "/v1/notebooks/{id}/tools/read", {"name": "note:secret"}),
    ("post", "/v1/notebooks/{id}/tools/explain", {"token": "a.b", "row": 0}),
    ("post", "/v1/notebooks/{id}/tools/recall", {"text": "secret"}),
    ("post", "/v1/documents/matrix-doc/notebooks", {"run": "run-x"}),
    (
        "post",
        "/v1/knowledge/proposals",
        {"notebook": "{id}", "name": "note:secret", "source": SOURCE},
    ),
]


def test_no_credential_but_the_right_one_reaches_a_notebook(
    server: Served, ann: Client, bob: Client
) -> None:
    opened = _open(ann, "matrix-doc", "run-1")
    notebook_id = opened["notebook"]["id"]
    agent_token = opened["agent_token"]
    Client(server, agent_token).post(
        f"/v1/notebooks/{notebook_id}/tools/remember",
        json={
            "based_on": 0,
            "request_id": "s",
            "changes": [{"op": "add", "record": {"name": "note:secret", "text": "SECRET-TEXT"}}],
        },
    )
    other = _open(bob, "bobs-doc", "run-1")
    forgotten = _open(ann, "matrix-doc", "run-forgotten")
    ann.delete(f"/v1/notebooks/{forgotten['notebook']['id']}")
    wrong: dict[str, str | None] = {
        "other owner": bob.http.headers["authorization"][7:],
        "no token": None,
        "bad token": "oho_not-a-real-token",
        "forged agent token": f"oha_{notebook_id}.{'0' * 64}",
        "agent of another notebook": other["agent_token"],
        "agent after forget": forgotten["agent_token"],
    }
    denials = {"unauthenticated", "forbidden", "not_found"}
    crossed = []
    for label, token in wrong.items():
        client = Client(server, token)
        for method, path, body in ROUTES:
            url = path.replace("{id}", notebook_id)
            payload = (
                None
                if body is None
                else {
                    key: (value.replace("{id}", notebook_id) if isinstance(value, str) else value)
                    for key, value in body.items()
                }
            )
            answer = getattr(client, method)(url, **({} if payload is None else {"json": payload}))
            code = answer.json().get("error", {}).get("code")
            if answer.status_code < 400 or code not in denials or "SECRET" in answer.text:
                crossed.append((label, method, path, answer.status_code, code))
    assert crossed == []
    # ...and the right credentials do get through.
    assert ann.get(f"/v1/notebooks/{notebook_id}").status_code == 200
    read = Client(server, agent_token).post(
        f"/v1/notebooks/{notebook_id}/tools/read", json={"name": "note:secret"}
    )
    assert read.json()["text"] == "SECRET-TEXT"


def test_an_agent_over_mcp_against_the_running_host(server: Served, ann: Client) -> None:
    """The official MCP client over streamable HTTP at /mcp of the real `oh serve`."""
    import asyncio
    import json

    import httpx2
    from mcp import Client as McpClient
    from mcp.client.streamable_http import streamable_http_client

    opened = _open(ann, "mcp-doc", "run-1")
    token = opened["agent_token"]

    def body(result: Any) -> dict[str, Any]:
        return dict(json.loads(result.content[0].text))

    async def scenario() -> None:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx2.AsyncClient(headers=headers) as http,
            McpClient(streamable_http_client(f"{server.url}/mcp", http_client=http)) as agent,
        ):
            tools = sorted(tool.name for tool in (await agent.list_tools()).tools)
            assert tools == ["explain", "query", "read", "recall", "remember"]  # recall in shadow
            write = {
                "based_on": 0,
                "request_id": "m-1",
                "changes": [
                    {"op": "add", "record": {"name": "lead:survey", "text": "methods missing"}}
                ],
            }
            applied = body(await agent.call_tool("remember", write))
            assert applied["status"] == "applied"
            assert body(await agent.call_tool("remember", write)) == applied
            stale = body(await agent.call_tool("remember", {**write, "request_id": "m-2"}))
            assert stale == {"status": "refused", "reason": "stale", "current_version": 1}
            answer = body(await agent.call_tool("query", {"question": "current_notes"}))
            names = [row["name"] for row in answer["rows"]]
            assert "lead:survey" in names
            read = body(await agent.call_tool("read", {"name": "lead:survey"}))
            assert read["text"] == "methods missing"
            why = body(await agent.call_tool("explain", {"token": answer["token"], "row": 0}))
            assert why["question"] == "current_notes"
            await asyncio.to_thread(ann.delete, f"/v1/notebooks/{opened['notebook']['id']}")
            late = await agent.call_tool("remember", {**write, "based_on": 1, "request_id": "m-3"})
            assert late.is_error
            assert body(late)["error"]["code"] == "purged"

    asyncio.run(scenario())


def test_a_method_a_route_does_not_answer_is_405_naming_every_method_it_does(
    ann: Client,
) -> None:
    ann.put("/v1/documents/methods-doc")
    for method, path, allowed in [
        ("TRACE", "/healthz", "GET"),
        ("PATCH", "/v1/documents/methods-doc", "DELETE, PUT"),
        ("PUT", "/v1/documents/methods-doc/notebooks", "POST"),
        ("OPTIONS", "/v1/notebooks/nb_x", "DELETE, GET"),
        ("GET", "/v1/notebooks/nb_x/tools/remember", "POST"),
    ]:
        answer = ann.request(method, path)
        assert answer.status_code == 405, (method, path, answer.text)
        assert answer.json()["error"]["code"] == "method_not_allowed"
        assert answer.headers["allow"] == allowed


def test_a_body_not_sent_as_json_is_415_and_changes_nothing(server: Served, ann: Client) -> None:
    opened = _open(ann, "media-doc", "run-1")
    agent = Client(server, opened["agent_token"])
    tools = f"/v1/notebooks/{opened['notebook']['id']}/tools"
    body = (
        b'{"based_on": 0, "request_id": "r", "changes": [{"op": "add", "record":'
        b' {"name": "note:a", "text": "a"}}]}'
    )
    for content_type in ("text/plain", "application/x-www-form-urlencoded", None):
        headers = {} if content_type is None else {"content-type": content_type}
        answer = agent.post(f"{tools}/remember", content=body, headers=headers)
        assert (answer.status_code, answer.json()["error"]["code"]) == (
            415,
            "unsupported_media_type",
        )
    for content_type in ("application/json; charset=utf-8", "application/merge-patch+json"):
        answer = agent.post(
            f"{tools}/query",
            content=b'{"question": "current_notes"}',
            headers={"content-type": content_type},
        )
        assert answer.status_code == 200, answer.text
    assert ann.get(f"/v1/notebooks/{opened['notebook']['id']}").json()["version"] == 0
    refused = ann.post(
        "/v1/documents/media-doc/notebooks",
        content=b'{"run": "run-2"}',
        headers={"content-type": "text/plain"},
    )
    assert refused.status_code == 415


def test_owner_bodies_are_read_by_the_same_rule_and_null_is_not_left_out(ann: Client) -> None:
    ann.put("/v1/documents/owner-bodies")
    opened = ann.post("/v1/documents/owner-bodies/notebooks", json={"run": "r", "pin": 0.0})
    assert opened.status_code == 201, opened.text
    assert opened.json()["notebook"]["pinned_revision"] == 0
    proposal = ann.post(
        "/v1/knowledge/proposals",
        json={"record": {"name": "finding:nulls", "text": "t"}, "source": SOURCE},
    ).json()["proposal_id"]
    for body in (
        {"decision": "accept", "reason": "ok", "record": None},
        {"decision": "reject", "reason": "no", "record": {"name": "finding:nulls", "text": "t"}},
        {"decision": "accept", "reason": "   "},
    ):
        answer = ann.post(f"/v1/knowledge/proposals/{proposal}/decision", json=body)
        assert (answer.status_code, answer.json()["error"]["code"]) == (400, "invalid_argument")
    for body in (
        {
            "notebook": None,
            "name": None,
            "record": {"name": "finding:n", "text": "t"},
            "source": SOURCE,
        },
        {"record": {"name": "finding:n", "text": "t"}, "source": {**SOURCE, "document": "a\x00"}},
    ):
        answer = ann.post("/v1/knowledge/proposals", json=body)
        assert (answer.status_code, answer.json()["error"]["code"]) == (400, "invalid_argument")
    # Every revision number up to 2^53-1 is a revision number (none of these exists yet).
    for revision in ("9007199254740991", "1000000000000000"):
        answer = ann.get(f"/v1/knowledge?revision={revision}")
        assert answer.status_code in (200, 404), answer.text
    for revision in ("9007199254740992", "-1", "1.0", "", "١"):
        answer = ann.get("/v1/knowledge", params={"revision": revision})
        assert (answer.status_code, answer.json()["error"]["code"]) == (400, "invalid_argument")


def test_the_openapi_document_declares_the_bearer_schemes_and_parameter_schemas(
    server: Served,
) -> None:
    document = httpx.get(f"{server.url}/openapi.json").json()
    assert set(document["components"]["securitySchemes"]) == {"owner", "agent"}
    assert all(
        scheme["type"] == "http" and scheme["scheme"] == "bearer"
        for scheme in document["components"]["securitySchemes"].values()
    )
    for path, item in document["paths"].items():
        for method, operation in item.items():
            expected = (
                [{"agent": []}]
                if "/tools/" in path or path.endswith("/bootstrap")
                else []
                if path in ("/healthz", "/metrics")
                else [{"owner": []}]
            )
            assert operation["security"] == expected, (method, path)
            # Every route says what it is for, beyond its generated name.
            assert operation["summary"] and len(operation["description"]) > 40, (method, path)
            for parameter in operation.get("parameters", []):
                assert "pattern" in parameter["schema"] or parameter["schema"]["type"] in (
                    "integer",
                    "string",
                ), (path, parameter)
            if "requestBody" in operation:
                assert "415" in operation["responses"], (method, path)
    remember = document["paths"]["/v1/notebooks/{notebook_id}/tools/remember"]["post"]
    changes = remember["requestBody"]["content"]["application/json"]["schema"]["properties"]
    assert changes["changes"]["maxItems"] == 64
    assert changes["based_on"]["maximum"] == 2**53 - 1
    assert "$defs" not in json.dumps(document)


def test_the_owner_lists_their_notebooks_and_never_anothers(
    server: Served, ann: Client, oh_ann: oh.client.Client, oh_bob: oh.client.Client
) -> None:
    oh_ann.put_document("listing-doc")
    mine = [oh_ann.open_notebook("listing-doc", f"run-{i}")["notebook"]["id"] for i in range(3)]
    oh_bob.put_document("bob-listing-doc")
    theirs = oh_bob.open_notebook("bob-listing-doc", "run-1")["notebook"]["id"]
    oh_ann.forget_notebook(mine[0])
    listed = oh_ann.list_notebooks(document="listing-doc")["notebooks"]
    assert {n["id"] for n in listed} == set(mine)
    order = [(n["started_at"], n["id"]) for n in listed]
    assert order == sorted(order, reverse=True)  # newest first
    assert {n["id"]: n["state"] for n in listed}[mine[0]] == "purged"
    assert all(n["document"] == "listing-doc" and n["run"].startswith("run-") for n in listed)
    assert theirs not in {n["id"] for n in oh_ann.iter_notebooks()}
    # Paged: two, then the rest, by the cursor the first page returned.
    first = oh_ann.list_notebooks(document="listing-doc", limit=2)
    rest = oh_ann.list_notebooks(document="listing-doc", limit=2, cursor=first["next_cursor"])
    assert [n["id"] for n in first["notebooks"] + rest["notebooks"]] == [n["id"] for n in listed]
    assert rest["next_cursor"] is None
    opened = oh_ann.list_notebooks(state="open", document="listing-doc")
    assert {n["id"] for n in opened["notebooks"]} == set(mine[1:])
    # Refusals: typed, 400 or 401, never a 500 (raw: the client never sends a limit of 1.5).
    for params in ({"limit": "0"}, {"limit": "1.5"}, {"state": "closed"}, {"cursor": "nope"},
                   {"document": "a/b"}):  # fmt: skip
        refused = ann.get("/v1/notebooks", params=params)
        assert (refused.status_code, refused.json()["error"]["code"]) == (400, "invalid_argument")
    unauthenticated = httpx.get(f"{server.url}/v1/notebooks")
    assert unauthenticated.status_code == 401
    assert httpx.post(f"{server.url}/v1/notebooks").status_code == 405


def test_every_route_in_the_openapi_document_is_in_the_http_docs(server: Served) -> None:
    """docs/http.md carries the contract in words: no route is served that it leaves out."""
    import re

    def shape(path: str) -> str:
        path = re.sub(r"/tools/[a-z]+$", "/tools/{}", path.partition("?")[0])
        return re.sub(r"\{[^}]*\}", "{}", path)

    text = (Path(__file__).resolve().parents[1] / "docs" / "http.md").read_text()
    documented = {
        (method, shape(path))
        for methods, path in re.findall(r"`((?:[A-Z]+(?:, )?)+) (/[^` ]*)", text)
        for method in methods.split(", ")
    }
    documented |= {
        (method, shape(path))
        for group in re.findall(r"`[A-Z]+ /[^`]*`(?:, `[A-Z]+ /[^`]*`)+", text)
        for method, path in re.findall(r"`([A-Z]+) (/[^` ]*)", group)
    }
    served = {
        (method.upper(), shape(path))
        for path, item in httpx.get(f"{server.url}/openapi.json").json()["paths"].items()
        for method in item
    }
    assert served - documented == set()


def test_the_owner_forgets_one_note_over_http(
    oh_ann: oh.client.Client, oh_bob: oh.client.Client
) -> None:
    oh_ann.put_document("forget-one.pdf")
    opened = oh_ann.open_notebook("forget-one.pdf", "run-1")
    notebook = opened["notebook"]["id"]
    written = oh_ann.with_token(opened["agent_token"]).remember(
        notebook,
        [{"op": "add", "record": {"name": n, "text": n}} for n in ("lead:keep", "lead:drop")],
        based_on=0,
    )
    assert written["status"] == "applied"
    with pytest.raises(NotFound):
        oh_bob.forget_note(notebook, "lead:drop")
    forgot = oh_ann.forget_note(notebook, "lead:drop")
    assert forgot == {"notebook": notebook, "version": 2, "removed": "lead:drop"}
    assert [n["name"] for n in oh_ann.records(notebook)["notes"]] == ["lead:keep"]
    with pytest.raises(NotFound):
        oh_ann.forget_note(notebook, "lead:drop")
    with pytest.raises(InvalidArgument):
        oh_ann.forget_note(notebook, "NotAName")


def test_a_tool_call_answered_before_the_router_answers_exactly_as_the_declared_route(
    tmp_path: Path,
) -> None:
    """Tool calls skip FastAPI's router (``oh.transports.http._HostApp``); under a ``root_path``
    they take the declared route instead. Both answer every body, good or bad, with the same status,
    headers and bytes, and a refused body changes nothing on either."""
    import asyncio
    from datetime import UTC, datetime

    from oh.config import Locations, open_host
    from oh.transports.http import MAX_BODY_BYTES, create_app

    at = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
    host = open_host(Locations.resolve(str(tmp_path / "data")), clock=lambda: at)
    host.register_document("ann", "doc")
    notebook, _ = host.open_notebook("ann", "doc", "run-1")
    token = host.agent_token(notebook.id)
    json_type = {"Content-Type": "application/json"}
    cases: list[tuple[str, dict[str, str], bytes]] = [
        ("remember", json_type, json.dumps(_remembering("note:a")).encode()),
        ("remember", json_type, json.dumps(_remembering("note:a")).encode()),  # a retry
        ("read", json_type, b'{"name": "note:a"}'),
        ("read", json_type, b'{"name": "note:missing"}'),
        ("read", {"Content-Type": "text/plain"}, b'{"name": "note:a"}'),
        ("read", {}, b'{"name": "note:a"}'),
        ("read", json_type, b""),
        ("read", json_type, b'{"name": '),
        ("read", json_type, b'{"name": "note:a", "name": "note:b"}'),
        ("read", json_type, b'{"name": "note:\\ud800"}'),
        ("read", json_type, b'{"name": "note:a\\u0000"}'),
        ("query", json_type, b'{"question": "current_notes", "limit": 5.0}'),
        ("query", json_type, b'{"question": "current_notes", "limit": NaN}'),
        ("remember", json_type, b"[" * (MAX_BODY_BYTES + 1)),
        ("explain", json_type, b'{"token": "x.y", "row": 0}'),
    ]

    async def answers(root_path: str, prefix: str) -> list[tuple[int, str, bytes]]:
        app = create_app(host, reads_inline=True)
        transport = httpx.ASGITransport(app=app, root_path=root_path)
        auth_header = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(transport=transport, base_url="http://oh") as client:
            out = []
            for tool, headers, content in cases:
                answer = await client.post(
                    f"{prefix}/v1/notebooks/{notebook.id}/tools/{tool}",
                    content=content,
                    headers={**auth_header, **headers},
                )
                out.append((answer.status_code, answer.headers["content-type"], answer.content))
            wrong = await client.post(
                f"{prefix}/v1/notebooks/{notebook.id}/tools/read",
                content=b'{"name": "note:a"}',
                headers=json_type,
            )
            out.append((wrong.status_code, wrong.headers["content-type"], wrong.content))
            return out

    try:
        direct = asyncio.run(answers("", ""))
        version = host._memory.notebook(notebook.id).version
        routed = asyncio.run(answers("/oh", "/oh"))
    finally:
        host.close()
    assert version == 1  # the retry and every refused body changed nothing
    # The second run's first write is a retry of the first run's: the same answer.
    assert routed == direct
    statuses = [status for status, _, _ in direct]
    assert statuses == [
        200,
        200,
        200,
        404,
        415,
        415,
        400,
        400,
        400,
        400,
        400,
        200,
        400,
        400,
        400,
        401,
    ]
    assert {kind for _, kind, _ in direct} == {"application/json"}


def _remembering(name: str) -> dict[str, Any]:
    change = {"op": "add", "record": {"name": name, "text": "seen on the reef"}}
    return {"based_on": 0, "request_id": "r-1", "changes": [change]}
