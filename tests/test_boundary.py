"""One body, one meaning: the same raw bytes sent as a tool call over HTTP, over MCP (streamable
HTTP, as JSON-RPC) and through the library give the same result.

A real ``oh`` app (HTTP API and MCP endpoint) is served by uvicorn on 127.0.0.1; each transport
gets its own notebook and the same sequence of calls, so versions and digests line up. The
bytes are those a careless or hostile client sends: ``5.0`` for 5, duplicate keys, integers no
JSON reader keeps exactly, doubles a scientist writes (``6.022e23``) and ones no double holds
(``1e-400``), NaN, lone surrogates, bytes that are not UTF-8, control characters in
a request id, nesting at the limit.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from oh.core.canonical import parse_input
from oh.core.clock import system_clock
from oh.core.notebook import Notebook
from oh.errors import OhError
from oh.host import Host, HostSettings
from oh.storage.base import MemoryStore
from oh.storage.sqlite.host import SqliteHostRegistry
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.lifecycle import FakeClock
from oh.testing.served import in_thread
from oh.tools import TOOLS
from oh.transports.http import create_app
from oh.transports.mcp import mcp_app

MCP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


class EveryNote:
    """Recall that finds every current note with score 1.0: enough to see ``limit`` travel."""

    memory: MemoryStore

    def recall(self, notebook: Notebook, text: str, limit: int) -> dict[str, Any]:
        rows = [
            {"name": r.name, "digest": r.digest, "origin": "note", "score": 1.0}
            for r in self.memory.records(notebook.id)
        ]
        return {"rows": rows[:limit], "pending": 0}


@dataclass
class Served:
    host: Host
    url: str


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    recall = EveryNote()
    host = Host(
        SqliteMemoryStore(tmp_path / "memory.db"),
        SqliteKnowledgeStore(tmp_path / "knowledge.db"),
        SqliteHostRegistry(tmp_path / "knowledge.db"),
        clock=FakeClock(),
        settings=HostSettings(recall_shadow=False),
        recall=recall,
    )
    recall.memory = host._memory
    endpoint = mcp_app(host)
    app = create_app(host, mcp=(endpoint.app, endpoint.lifespan))
    with in_thread(app) as url:
        yield Served(host, url)
    host.close()


def _agent(served: Served, document: str) -> tuple[str, str]:
    """A fresh notebook of the run ``run`` on its own document: every notebook's author is the
    same ``agent:run``."""
    served.host.register_document("ann", document)
    notebook, _ = served.host.open_notebook("ann", document, "run")
    return notebook.id, served.host.agent_token(notebook.id)


Transport = Callable[[str, bytes], dict[str, Any]]


def over_http(served: Served, notebook_id: str, token: str) -> Transport:
    def call(tool: str, raw: bytes) -> dict[str, Any]:
        response = httpx.post(
            f"{served.url}/v1/notebooks/{notebook_id}/tools/{tool}",
            content=raw,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            timeout=30,
        )
        body: dict[str, Any] = response.json()
        assert response.status_code == (200 if "error" not in body else response.status_code)
        return body

    return call


def over_mcp(served: Served, token: str) -> Transport:
    def call(tool: str, raw: bytes) -> dict[str, Any]:
        envelope = (
            b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"'
            + tool.encode()
            + b'","arguments":'
            + raw
            + b"}}"
        )
        response = httpx.post(
            f"{served.url}/mcp",
            content=envelope,
            headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        answer = response.json()
        assert answer["id"] == 7
        result = answer["result"]
        body: dict[str, Any] = result["structuredContent"]
        assert json.loads(result["content"][0]["text"]) == body
        assert result["isError"] == ("error" in body)
        return body

    return call


def over_the_library(served: Served, token: str) -> Transport:
    def call(tool: str, raw: bytes) -> dict[str, Any]:
        try:
            arguments = parse_input(raw)
        except OhError as exc:
            return exc.to_json()
        return served.host.call_tool(token, tool, arguments)

    return call


def _nested(levels: int) -> str:
    return '{"a":' * levels + "1" + "}" * levels


# Each call: the tool and its raw arguments; "TOKEN" is replaced by the token of the answer the
# first query of that notebook returned.
CALLS: list[tuple[str, bytes]] = [
    (
        "remember",
        b'{"based_on": 0.0, "request_id": "r-1", "changes": [{"op": "add", "record":'
        b' {"name": "note:a", "text": "a", "fields": {"n": 2.0, "x": 0.5, "e": 1e2}}}]}',
    ),
    # The identical retry, spelled with an integer: the same payload, so the original result.
    (
        "remember",
        b'{"based_on": 0, "request_id": "r-1", "changes": [{"op": "add", "record":'
        b' {"name": "note:a", "text": "a", "fields": {"n": 2, "x": 0.5, "e": 100}}}]}',
    ),
    (
        "remember",
        b'{"based_on": 1, "request_id": "r-2", "changes": [{"op": "add", "record":'
        b' {"name": "note:b", "text": "b", "fields": {"k": 1, "k": 2}}}]}',
    ),
    (
        "remember",
        b'{"based_on": 1, "request_id": "r-2", "changes": [{"op": "add", "record":'
        b' {"name": "note:b", "text": "b", "fields": {"k": 9007199254740992}}}]}',
    ),
    (
        "remember",
        b'{"based_on": 1, "request_id": "r-2", "changes": [{"op": "add", "record":'
        b' {"name": "note:b", "text": "b", "fields": {"k": 1e-400}}}]}',
    ),
    (
        "remember",
        b'{"based_on": 1, "request_id": "r-2", "changes": [{"op": "add", "record":'
        b' {"name": "note:b", "text": "b", "fields": {"k": NaN}}}]}',
    ),
    (
        "remember",
        b'{"based_on": 1, "request_id": "r-2", "changes": [{"op": "add", "record":'
        b' {"name": "note:b", "text": "\\ud800"}}]}',
    ),
    (
        "remember",
        b'{"based_on": 1, "request_id": "r-2", "changes": [{"op": "add", "record":'
        b' {"name": "note:b", "text": "\xff\xfe"}}]}',
    ),
    (
        "remember",
        b'{"based_on": 1, "request_id": "r\\u0000-2", "changes": [{"op": "add", "record":'
        b' {"name": "note:b", "text": "b"}}]}',
    ),
    (
        "remember",
        b'{"based_on": 1, "request_id": "r\\u0085-2", "changes": [{"op": "add", "record":'
        b' {"name": "note:b", "text": "b"}}]}',
    ),
    (
        "remember",
        b'{"based_on": true, "request_id": "r-2", "changes": [{"op": "add", "record":'
        b' {"name": "note:b", "text": "b"}}]}',
    ),
    (
        "remember",
        b'{"based_on": 1, "request_id": "r-2", "changes": [{"op": "add", "record":'
        b' {"name": "note:b", "text": "b", "fields": {"k": 9007199254740991, "m": -0.0}}}]}',
    ),
    (
        "remember",
        b'{"based_on": 2, "request_id": "r-3", "changes": [{"op": "add", "record":'
        b' {"name": "note:c", "text": "c", "fields": ' + _nested(25).encode() + b"}}]}",
    ),
    (
        "remember",
        b'{"based_on": 2, "request_id": "r-3", "changes": [{"op": "add", "record":'
        b' {"name": "note:c", "text": "c", "fields": ' + _nested(40).encode() + b"}}]}",
    ),
    ("query", b'{"question": "current_notes", "limit": 5.0}'),
    ("query", b'{"question": "current_notes", "limit": 5.5}'),
    ("query", b'{"question": "current_notes", "limit": true}'),
    ("query", b'{"question": "changes_since", "since": 0.0}'),
    ("query", b'{"question": "everything"}'),
    ("query", b'{"question": "related"}'),
    ("explain", b'{"token": "TOKEN", "row": 0.0}'),
    ("explain", b'{"token": "TOKEN", "row": 1e0}'),
    ("explain", b'{"token": "TOKEN", "row": 9}'),
    ("read", b'{"name": "note:a", "origin": "note", "origin": "reviewed"}'),
    ("read", b'{"name": "note:a"}'),
    ("recall", b'{"text": "a", "limit": 5.0}'),
    ("recall", b'{"text": "   "}'),
    (
        "remember",
        b'{"based_on": 3, "request_id": "r-4", "changes": ['
        + b",".join(b'{"op": "remove", "name": "note:x%d"}' % i for i in range(65))
        + b"]}",
    ),
    # A body nests at most 64 levels on every transport, counted from the arguments (over MCP
    # the JSON-RPC envelope around them does not count). The MCP SDK's own parser stops near 200
    # levels, so a limit at the reader is what keeps the three alike.
    ("query", b'{"question": "current_notes", "x": ' + b"[" * 63 + b"]" * 63 + b"}"),
    ("query", b'{"question": "current_notes", "x": ' + b"[" * 64 + b"]" * 64 + b"}"),
    ("query", b'{"fields": ' + b"[" * 250 + b"]" * 250 + b"}"),
    ("query", b'{"question": "current_notes", "x": "' + b"[" * 500 + b'"}'),
]


def _comparable(body: dict[str, Any]) -> dict[str, Any]:
    """What must be equal across notebooks: everything but the ids and tokens of answers."""
    return {
        key: value
        for key, value in body.items()
        if key not in ("answer_id", "token", "token_expires_at", "next_cursor")
    }


def _run(transport: Transport) -> list[dict[str, Any]]:
    results = []
    token = ""
    for tool, raw in CALLS:
        result = transport(tool, raw.replace(b"TOKEN", token.encode()))
        if tool == "query" and "token" in result and not token:
            token = result["token"]
        results.append(result)
    return results


def test_the_same_bytes_mean_the_same_over_http_mcp_and_the_library(served: Served) -> None:
    http = _run(over_http(served, *_agent(served, "http")))
    mcp = _run(over_mcp(served, _agent(served, "mcp")[1]))
    library = _run(over_the_library(served, _agent(served, "library")[1]))
    for (tool, raw), a, b, c in zip(CALLS, http, mcp, library, strict=True):
        assert _comparable(a) == _comparable(b) == _comparable(c), (tool, raw[:120])
    codes = [result.get("error", {}).get("code", result.get("status", "ok")) for result in http]
    # The sequence says what each spelling means (and that errors are errors, not crashes).
    assert codes == [
        "applied",
        "applied",
        *["invalid_argument"] * 9,
        "applied",
        "applied",
        "invalid_argument",
        "ok",
        "invalid_argument",
        "invalid_argument",
        "ok",
        "unknown_question",
        "invalid_argument",
        "ok",
        "ok",
        "invalid_argument",
        "invalid_argument",
        "ok",
        "ok",
        "invalid_argument",
        "too_many_changes",
        *["invalid_argument"] * 4,
    ]
    assert "nested" not in http[-4]["error"]["message"]  # 64 levels: refused for the unknown key
    assert http[-3]["error"]["message"] == "request body: nested deeper than 64 levels"
    assert http[-2]["error"]["message"] == "request body: nested deeper than 64 levels"
    assert "nested" not in http[-1]["error"]["message"]  # brackets in a string are text
    # 2.0 is the number 2: results carry JSON integers, and the retry spelled 0 is identical.
    assert http[0] == http[1]
    assert type(http[0]["version"]) is int
    assert http[24]["fields"] == {"e": 100, "n": 2, "x": 0.5}
    assert [type(v) for v in http[24]["fields"].values()] == [int, int, float]
    assert http[20]["row"] == 0 and type(http[20]["row"]) is int
    assert len(http[25]["rows"]) == 3  # note:a, note:b, note:c


def test_python_values_from_a_library_caller_follow_the_same_rule(served: Served) -> None:
    """``5.0`` built in Python (no JSON at all) is read as 5, as the bytes ``5.0`` are."""
    _, token = _agent(served, "python")
    http = over_http(served, *_agent(served, "bytes"))
    call = served.host.call_tool
    for tool, raw in CALLS:
        if b"NaN" in raw or b'"k": 1, "k"' in raw or b"origin" in raw or b"\xff" in raw:
            continue  # not a value Python's own reader builds the same way
        if b"e-400" in raw:
            continue  # Python's own reader makes it 0.0 without a word; Oh's refuses it
        if b"TOKEN" in raw:
            continue
        expected = http(tool, raw)
        got = call(token, tool, json.loads(raw))
        assert _comparable(got).keys() == _comparable(expected).keys(), (tool, raw[:120])
        assert got.get("error", {}).get("code") == expected.get("error", {}).get("code")
    assert call(token, "query", {"question": "current_notes", "limit": 1.0})["rows"]


@contextlib.asynccontextmanager
async def mcp_client(url: str, token: str) -> AsyncIterator[Client]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
        Client(streamable_http_client(url, http_client=http), mode="legacy") as client,
    ):
        yield client


def test_the_official_mcp_client_reads_integral_floats_as_integers(served: Served) -> None:
    """What the issue saw as 503 "internal error: TypeError": 5.0 and 0.0 from a real client."""
    _, token = _agent(served, "client")

    async def scenario() -> None:
        async with mcp_client(f"{served.url}/mcp", token) as client:
            written = await client.call_tool(
                "remember",
                {
                    "based_on": 0.0,
                    "request_id": "r-1",
                    "changes": [{"op": "add", "record": {"name": "note:a", "text": "a"}}],
                },
            )
            assert written.structured_content["version"] == 1
            query = await client.call_tool("query", {"question": "current_notes", "limit": 5.0})
            assert not query.is_error
            answer = query.structured_content
            explained = await client.call_tool("explain", {"token": answer["token"], "row": 0.0})
            assert not explained.is_error and explained.structured_content["row"] == 0
            recalled = await client.call_tool("recall", {"text": "a", "limit": 5.0})
            assert not recalled.is_error

    anyio.run(scenario)


def test_a_message_the_reader_refuses_never_reaches_the_sdk_or_a_tool(served: Served) -> None:
    """A duplicate key outside the arguments, and a client trying to set Oh's own verdict."""
    notebook_id, token = _agent(served, "envelope")
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    doubled = (
        b'{"jsonrpc":"2.0","id":1,"id":2,"method":"tools/call","params":{"name":"remember",'
        b'"arguments":{"based_on":0,"request_id":"r","changes":[{"op":"add","record":'
        b'{"name":"note:a","text":"a"}}]}}}'
    )
    answer = httpx.post(f"{served.url}/mcp", content=doubled, headers=headers).json()
    assert answer["result"]["structuredContent"]["error"]["code"] == "invalid_argument"
    assert served.host._memory.notebook(notebook_id).version == 0
    spoofed = (
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read",'
        b'"arguments":{"name":"note:a"},"_meta":{"oh/refused":"fake"}}}'
    )
    answer = httpx.post(f"{served.url}/mcp", content=spoofed, headers=headers).json()
    assert answer["result"]["structuredContent"]["error"]["code"] == "not_found"
    listed = b'{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"a":1,"a":2}}}'
    answer = httpx.post(f"{served.url}/mcp", content=listed, headers=headers).json()
    assert "error" in answer and "duplicate" in answer["error"]["message"]


def test_oh_mcp_over_stdio_reads_each_line_as_http_reads_a_body(tmp_path: Path) -> None:
    """``oh mcp``: raw lines with a duplicate key, ``5.0`` and bytes that are not UTF-8."""
    # The child process runs on the real clock, so the notebook is opened on it too.
    host = Host(
        SqliteMemoryStore(tmp_path / "memory.db"),
        SqliteKnowledgeStore(tmp_path / "knowledge.db"),
        SqliteHostRegistry(tmp_path / "knowledge.db"),
        clock=system_clock,
    )
    host.register_document("ann", "doc")
    notebook, _ = host.open_notebook("ann", "doc", "run")
    token = host.agent_token(notebook.id)
    host.close()

    def call(number: int, tool: str, arguments: bytes) -> bytes:
        return (
            b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"%s","arguments":'
            % (number, tool.encode())
            + arguments
            + b"}}\n"
        )

    lines = [
        b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",'
        b'"capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}\n',
        b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n',
        call(
            2,
            "remember",
            b'{"based_on":0,"request_id":"r","changes":[{"op":"add","record":'
            b'{"name":"note:a","text":"a","fields":{"k":1,"k":2}}}]}',
        ),
        call(3, "query", b'{"question":"current_notes","limit":5.0}'),
        call(4, "read", b'{"name":"note:\xff"}'),
        call(
            5,
            "remember",
            b'{"based_on":0.0,"request_id":"r","changes":[{"op":"add","record":'
            b'{"name":"note:a","text":"a","fields":{"k":2.0}}}]}',
        ),
    ]
    child = subprocess.Popen(
        [sys.executable, "-m", "oh.cli", "mcp", "--notebook", notebook.id, "--data", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "OH_AGENT_TOKEN": token, "PYTHONUNBUFFERED": "1"},
    )
    assert child.stdin is not None and child.stdout is not None
    answers: dict[int, Any] = {}
    try:
        for line in lines:  # one at a time, each answered before the next (the stdin stays open)
            child.stdin.write(line)
            child.stdin.flush()
            if b'"id"' not in line:
                continue
            while True:
                ready, _, _ = select.select([child.stdout], [], [], 120)
                assert ready, "oh mcp did not answer within 120 s"
                message = json.loads(child.stdout.readline())
                if "id" in message:
                    answers[message["id"]] = message
                    break
    finally:
        child.stdin.close()
        child.wait(timeout=60)
    assert set(answers) == {1, 2, 3, 4, 5}

    def code(number: int) -> str:
        body = answers[number]["result"]["structuredContent"]
        return str(body.get("error", {}).get("code", body.get("status", "ok")))

    assert [code(n) for n in (2, 3, 4, 5)] == [
        "invalid_argument",
        "ok",
        "invalid_argument",
        "applied",
    ]
    assert "duplicate" in answers[2]["result"]["structuredContent"]["error"]["message"]
    assert "UTF-8" in answers[4]["result"]["structuredContent"]["error"]["message"]
    assert answers[5]["result"]["structuredContent"]["version"] == 1


def test_a_bug_is_answered_as_storage_unavailable_and_counted_as_a_bug(
    served: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An exception Oh did not expect, in a tool and in an owner route, on every transport: the
    caller gets ``storage_unavailable`` (the public codes have none for a bug), nothing crashes,
    and the metrics count it as ``bug``, never among genuine storage failures."""
    tools = served.host._tools

    def broken(*_: Any) -> dict[str, Any]:
        raise TypeError("a bug in the read tool")

    monkeypatch.setitem(TOOLS, "read", replace(TOOLS["read"], run=broken))
    arguments = b'{"name":"note:a"}'
    calls = {
        "http": over_http(served, *_agent(served, "http")),
        "mcp": over_mcp(served, _agent(served, "mcp")[1]),
        "host": over_the_library(served, _agent(served, "host")[1]),
    }
    for transport, call in calls.items():
        body = call("read", arguments)
        assert body == {
            "error": {"code": "storage_unavailable", "message": "internal error: TypeError"}
        }, transport
    # The library's own entry point, without Host: its catch-all gives the same body.
    notebook_id, _ = _agent(served, "library")
    caller = served.host.caller(served.host.agent_token(notebook_id), notebook_id)
    assert tools.call(caller, "read", {"name": "note:a"}) == body
    with pytest.raises(TypeError):
        tools.run(caller, "read", {"name": "note:a"})  # what a caller who wants the raise uses
    response = httpx.post(
        f"{served.url}/v1/notebooks/{notebook_id}/tools/read",
        content=arguments,
        headers={
            "Authorization": f"Bearer {served.host.agent_token(notebook_id)}",
            "Content-Type": "application/json",
        },
    )
    assert response.status_code == 503

    # An owner route: a bare OhError (no code of its own) is a bug too.
    def no_code(*_: Any) -> Any:
        raise OhError("raised without a code")

    served.host.knowledge_at = no_code  # type: ignore[method-assign]
    owner = served.host.create_owner_token("ann")
    response = httpx.get(f"{served.url}/v1/knowledge", headers={"Authorization": f"Bearer {owner}"})
    assert response.status_code == 503
    assert response.json() == {
        "error": {"code": "storage_unavailable", "message": "internal error: OhError"}
    }
    metrics = httpx.get(f"{served.url}/metrics").text
    assert 'oh_tool_calls_total{tool="read",outcome="bug"} 4' in metrics
    assert 'outcome="storage_unavailable"' not in metrics
    assert 'oh_events_total{event="bug"} 1' in metrics


# Doubles as a scientist writes them: accepted on every transport and kept by their RFC 8785
# form. An integer literal no JSON reader keeps exactly, and literals a double cannot hold, are
# refused the same way everywhere.
DOUBLES = (
    b'{"avogadro": 6.022e23, "earth_kg": 5.972e24, "big": 1e21, "huge": 1e300,'
    b' "twenty": 1e20, "negative": -2.5E+30, "tiny": 5e-324, "two": 2.0}'
)
NOT_NUMBERS_A_READER_KEEPS = [
    b"9007199254740993",
    b"-9007199254740993",
    b"123456789012345678901234567890",
    b"1e-400",
    b"-2.5e-400",
    b"1e400",
    b"-1E999",
]


def test_doubles_are_doubles_on_every_transport(served: Served) -> None:
    transports = {
        "http": over_http(served, *_agent(served, "d-http")),
        "mcp": over_mcp(served, _agent(served, "d-mcp")[1]),
        "library": over_the_library(served, _agent(served, "d-library")[1]),
    }
    change = b'{"op": "add", "record": {"name": "fact:constants", "text": "c", "fields": %s}}'
    written, read = {}, {}
    for name, transport in transports.items():
        body = b'{"based_on": 0, "request_id": "r-1", "changes": [' + change % DOUBLES + b"]}"
        written[name] = transport("remember", body)
        read[name] = transport("read", b'{"name": "fact:constants"}')
    assert written["http"]["status"] == "applied", written["http"]
    assert written["http"] == written["mcp"] == written["library"]
    assert _comparable(read["http"]) == _comparable(read["mcp"]) == _comparable(read["library"])
    fields = read["http"]["fields"]
    assert fields == {
        "avogadro": 6.022e23,
        "earth_kg": 5.972e24,
        "big": 1e21,
        "huge": 1e300,
        "twenty": 1e20,
        "negative": -2.5e30,
        "tiny": 5e-324,
        "two": 2,
    }
    assert type(fields["two"]) is int and type(fields["avogadro"]) is float
    # Kept by the RFC 8785 form: the digest every transport answered is over that text.
    from oh.core.canonical import parse_input
    from oh.core.changes import log_changes, parse_changes

    (logged,) = log_changes(parse_changes(parse_input(b"[" + change % DOUBLES + b"]")))
    assert logged.content is not None
    for form in ("6.022e+23", "5.972e+24", "1e+21", "1e+300", "100000000000000000000", "-2.5e+30"):
        assert form in logged.content, logged.content
    assert read["http"]["digest"] == logged.digest == written["http"]["written"][0]["digest"]
    for number in NOT_NUMBERS_A_READER_KEEPS:
        fields_body = b'{"n": %s}' % number
        body = b'{"based_on": 1, "request_id": "r-2", "changes": [' + change % fields_body + b"]}"
        answers = {name: t("remember", body) for name, t in transports.items()}
        codes = {name: a.get("error", {}).get("code") for name, a in answers.items()}
        assert set(codes.values()) == {"invalid_argument"}, (number, answers)


def test_a_library_callers_float_is_a_double_and_its_huge_int_is_refused(served: Served) -> None:
    _, token = _agent(served, "py-doubles")
    call = served.host.call_tool
    record = {"name": "fact:mole", "text": "m", "fields": {"n": 6.022e23, "half": 0.5}}
    done = call(
        token,
        "remember",
        {"based_on": 0, "request_id": "r-1", "changes": [{"op": "add", "record": record}]},
    )
    assert done["status"] == "applied", done
    assert call(token, "read", {"name": "fact:mole"})["fields"] == {"n": 6.022e23, "half": 0.5}
    record = {"name": "fact:id", "text": "i", "fields": {"id": 2**53 + 1}}
    refused = call(
        token,
        "remember",
        {"based_on": 1, "request_id": "r-2", "changes": [{"op": "add", "record": record}]},
    )
    assert refused["error"]["code"] == "invalid_argument"
