"""Each tool is declared once (``oh.tools.TOOLS``), and everything that offers or describes a
tool reads that declaration: the dispatch, HTTP, MCP, the OpenAPI document, the published
schemas, the metrics and memory cards; docs/tools.md and ``oh.client`` are held to it here.

The last test proves the claim the other way round: a sixth tool, declared in this file and
nowhere else, is served over HTTP and MCP, published in the OpenAPI document, counted in the
metrics and refused the same way everywhere, with no other code touched."""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import fastjsonschema
import httpx
import pytest
from mcp import Client

from oh.client import AsyncClient
from oh.client import Client as OhClient
from oh.client._wire import READ_ONLY_TOOLS
from oh.core.notebook import Notebook
from oh.host import Host
from oh.storage.sqlite.host import SqliteHostRegistry
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.lifecycle import FakeClock
from oh.testing.served import in_thread
from oh.tools import TOOL_NAMES, TOOLS, Caller, Example, Tool, Tools, inline_tools
from oh.tools.json_schema import (
    KIND,
    check_schema,
    compile_schema,
    integer,
    object_of,
    published,
)
from oh.tools.schemas import ARGUMENTS, RESULTS
from oh.transports.http import create_app
from oh.transports.mcp import DESCRIPTIONS, build_server, mcp_app

ROOT = Path(__file__).resolve().parents[1]


def test_the_published_schemas_and_descriptions_are_the_declarations() -> None:
    assert TOOL_NAMES == ("remember", "query", "read", "explain", "recall")
    assert list(ARGUMENTS) == list(TOOLS)
    for name, tool in TOOLS.items():
        assert tool.name == name
        assert ARGUMENTS[name] is tool.arguments
        assert RESULTS[name] is tool.result
        assert DESCRIPTIONS[name] == tool.description
    assert inline_tools() == {"read", "explain"}


@pytest.mark.parametrize("name", list(TOOLS))
def test_every_declared_example_is_valid_and_parses(name: str) -> None:
    """The examples of the HTTP reference are valid against the declared schemas, and each
    request example is one the tool's own parser accepts."""
    tool = TOOLS[name]
    check_arguments = fastjsonschema.compile(tool.arguments)
    check_result = fastjsonschema.compile(tool.result)
    assert tool.requests and tool.results
    for example in tool.requests:
        check_arguments(example.value)
        tool.parse(example.value)
    for example in tool.results:
        check_result(example.value)
    for examples in (tool.requests, tool.results):
        named = [e for e in examples if e.key]
        assert len(named) in (0, len(examples)), "several examples are each named"
        assert len({e.key for e in named}) == len(named)


@pytest.mark.parametrize("client", [OhClient, AsyncClient])
def test_the_client_has_a_method_per_tool_with_the_declared_arguments(client: type) -> None:
    """``oh.client`` never imports the server, so it cannot read the registry: it is held to it.
    Each tool is a method whose parameters after the notebook are the tool's arguments, those
    without a default are required by the schema, and the client retries exactly the tools
    declared read-only (and a remember, by its request id)."""
    for name, tool in TOOLS.items():
        method = getattr(client, name)
        parameters = list(inspect.signature(method).parameters.values())[2:]  # self, notebook
        assert {p.name for p in parameters} == set(tool.arguments["properties"]), name
        required = {p.name for p in parameters if p.default is inspect.Parameter.empty}
        assert required <= set(tool.arguments["required"]), name
    assert {name for name, tool in TOOLS.items() if tool.read_only} == READ_ONLY_TOOLS


def test_docs_tools_md_lists_every_tool_as_declared() -> None:
    text = (ROOT / "docs" / "tools.md").read_text()
    rows = re.findall(r"^\| `(\w+)` \| [^|]+ \| (yes|no) \| ([^|]+) \|$", text, re.MULTILINE)
    assert [row[0] for row in rows] == list(TOOLS)
    for name, changes, offered in rows:
        tool = TOOLS[name]
        assert (changes == "no") == tool.read_only, name
        assert (offered.strip() == "always") == (not tool.needs_recall), name
        assert f"\n## {name}\n" in text, f"docs/tools.md has no section for {name}"


# -- a sixth tool, declared here and nowhere else ---------------------------------------------


class Count(NamedTuple):
    kind: str | None


COUNT_ARGUMENTS = published(object_of({"kind": KIND}, []))
COUNT_RESULT = published(object_of({"notes": integer()}, ["notes"]))
_check_count = compile_schema(COUNT_ARGUMENTS)


def _parse_count(arguments: Any) -> Count:
    check_schema(_check_count, "count", arguments)
    return Count(arguments.get("kind"))


def _run_count(tools: Tools, caller: Caller, arguments: Count) -> dict[str, Any]:
    notebook: Notebook = tools.open_notebook(caller)
    records = tools.memory.records(notebook.id)
    return {"notes": sum(1 for r in records if arguments.kind in (None, r.kind))}


COUNT = Tool(
    name="count",
    description="How many working notes the notebook holds, of one kind or all.",
    arguments=COUNT_ARGUMENTS,
    result=COUNT_RESULT,
    parse=_parse_count,
    run=_run_count,
    inline=True,
    card=lambda result: ("counted", ()) if result["notes"] else None,
    requests=(Example("", "", {"kind": "lead"}),),
    results=(Example("", "", {"notes": 2}),),
)


def _host(directory: Path) -> Host:
    """A host over embedded files in ``directory``, on a test clock."""
    return Host(
        SqliteMemoryStore(directory / "memory.db"),
        SqliteKnowledgeStore(directory / "knowledge.db"),
        SqliteHostRegistry(directory / "knowledge.db"),
        clock=FakeClock(),
    )


class Served(NamedTuple):
    host: Host
    url: str


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    monkeypatch.setitem(TOOLS, "count", COUNT)
    host = _host(tmp_path)
    endpoint = mcp_app(host)
    app = create_app(host, mcp=(endpoint.app, endpoint.lifespan), reads_inline=True)
    try:
        with in_thread(app) as url:
            yield Served(host, url)
    finally:
        host.close()


def test_a_sixth_tool_is_one_declaration(served: Served) -> None:
    host = served.host
    host.register_document("ann", "report")
    notebook, _ = host.open_notebook("ann", "report", "run")
    token = host.agent_token(notebook.id)
    cards: list[Any] = []
    host.subscribe(cards.append)
    written = host.call_tool(
        token,
        "remember",
        {
            "based_on": 0,
            "request_id": "r-1",
            "changes": [
                {"op": "add", "record": {"name": "lead:a", "text": "a"}},
                {"op": "add", "record": {"name": "lead:b", "text": "b"}},
                {"op": "add", "record": {"name": "todo:c", "text": "c"}},
            ],
        },
    )
    assert written["status"] == "applied"
    auth = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    route = f"{served.url}/v1/notebooks/{notebook.id}/tools/count"

    # The library, HTTP and MCP run it and agree.
    assert host.call_tool(token, "count", {"kind": "lead"}) == {"notes": 2}
    answer = httpx.post(route, content=b'{"kind":"lead"}', headers=auth, timeout=30)
    assert (answer.status_code, answer.json()) == (200, {"notes": 2})
    assert httpx.post(route, content=b"{}", headers=auth, timeout=30).json() == {"notes": 3}

    async def over_mcp() -> tuple[Any, Any, Any]:
        async with Client(build_server(host, agent_token=token)) as client:
            listed = {tool.name: tool for tool in (await client.list_tools()).tools}
            good = await client.call_tool("count", {"kind": "todo"})
            bad = await client.call_tool("count", {"kind": "Not A Kind"})
            return listed["count"], good, bad

    listed, good, bad = anyio.run(over_mcp)
    assert listed.input_schema == COUNT_ARGUMENTS
    assert listed.description == COUNT.description
    assert listed.annotations is not None and listed.annotations.read_only_hint is True
    assert good.structured_content == {"notes": 1} and not good.is_error
    assert bad.is_error and bad.structured_content["error"]["code"] == "invalid_argument"

    # Bad arguments are refused with the same body everywhere, and change nothing.
    refused = host.call_tool(token, "count", {"kind": "Not A Kind"})
    assert refused["error"]["code"] == "invalid_argument"
    over_http = httpx.post(route, content=b'{"kind":"Not A Kind"}', headers=auth, timeout=30)
    assert (over_http.status_code, over_http.json()) == (400, refused)
    assert bad.structured_content == refused
    extra = httpx.post(route, content=b'{"kind":"lead","x":1}', headers=auth, timeout=30)
    assert extra.status_code == 400 and extra.json()["error"]["code"] == "invalid_argument"

    # The OpenAPI document publishes it with its schemas and examples.
    document = httpx.get(f"{served.url}/openapi.json", timeout=30).json()
    operation = document["paths"]["/v1/notebooks/{notebook_id}/tools/count"]["post"]
    assert operation["summary"] == "The count tool"
    body = operation["requestBody"]["content"]["application/json"]
    assert body["example"] == {"kind": "lead"}
    assert body["schema"]["properties"] == COUNT_ARGUMENTS["properties"]
    ok = operation["responses"]["200"]["content"]["application/json"]
    assert ok["example"] == {"notes": 2}

    # An unknown tool's message lists it; the metrics count it; its card is made.
    unknown = httpx.post(f"{route}s", content=b"{}", headers=auth, timeout=30).json()
    assert "count" in unknown["error"]["message"]
    metrics = httpx.get(f"{served.url}/metrics", timeout=30).text
    assert 'oh_tool_calls_total{tool="count",outcome="ok"} 4' in metrics
    assert 'oh_tool_calls_total{tool="count",outcome="invalid_argument"} 4' in metrics
    assert [card.kind for card in cards] == ["remembered", *["counted"] * 4]


def test_the_sixth_tool_is_gone_once_undeclared(tmp_path: Path) -> None:
    """The fixture above restores the registry: the declaration is the only trace."""
    assert "count" not in TOOLS
    host = _host(tmp_path)
    try:
        host.register_document("ann", "report")
        notebook, _ = host.open_notebook("ann", "report", "run")
        answer = host.call_tool(host.agent_token(notebook.id), "count", {})
        assert answer["error"]["code"] == "not_found"
        assert json.dumps(answer).count("remember, query, read, explain, recall") == 1
    finally:
        host.close()


def test_mcp_tells_the_agent_each_tools_hints_from_its_flags(tmp_path: Path) -> None:
    """``tools/list`` over the official client: remember may remove records and is safe to
    retry with its request id; every other tool only reads; none reaches outside Oh."""
    host = _host(tmp_path)
    try:
        host.register_document("ann", "report")
        notebook, _ = host.open_notebook("ann", "report", "run")

        async def listed() -> dict[str, Any]:
            server = build_server(host, agent_token=host.agent_token(notebook.id))
            async with Client(server) as client:
                return {tool.name: tool for tool in (await client.list_tools()).tools}

        tools = anyio.run(listed)
    finally:
        host.close()
    assert list(tools) == ["remember", "query", "read", "explain"]  # recall is off here
    hints = {
        name: (
            tool.title,
            tool.annotations.read_only_hint,
            tool.annotations.destructive_hint,
            tool.annotations.idempotent_hint,
            tool.annotations.open_world_hint,
        )
        for name, tool in tools.items()
        if tool.annotations is not None
    }
    assert hints == {
        "remember": ("Remember", False, True, True, False),
        "query": ("Query", True, None, None, False),
        "read": ("Read", True, None, None, False),
        "explain": ("Explain", True, None, None, False),
    }
