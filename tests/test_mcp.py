"""The MCP endpoint (SPEC §5, §6, §11) driven by the official MCP client: in process, over
stdio (``oh mcp`` as a child process) and over streamable HTTP (uvicorn on 127.0.0.1).

Every tool result is checked twice: the text content is the same JSON object as the structured
content, and a non-error result conforms to the published result schema (the client checks it
against the tool's outputSchema too)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import fastjsonschema
import httpx
import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from starlette.applications import Starlette
from starlette.routing import Route

from oh.core.clock import system_clock
from oh.core.notebook import Notebook
from oh.host import Host, HostSettings
from oh.storage.base import MemoryStore
from oh.storage.sqlite.host import SqliteHostRegistry
from oh.storage.sqlite.knowledge import SqliteKnowledgeStore
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.served import in_thread
from oh.tools.schemas import ARGUMENTS, RESULTS, TOOL_CONTRACT_VERSION
from oh.transports.mcp import BOOTSTRAP_URI, DESCRIPTIONS, build_server, mcp_app

ROOT = Path(__file__).resolve().parents[1]
FOUR = ["remember", "query", "read", "explain"]
MODES = ["auto", "legacy"]  # 2026-07-28 (server/discover) and the 2025 initialize handshake
CHECK_RESULT = {tool: fastjsonschema.compile(schema) for tool, schema in RESULTS.items()}


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


class FakeRecall:
    """Every current note, score 1.0: enough to see recall travel through MCP."""

    memory: MemoryStore

    def recall(self, notebook: Notebook, text: str, limit: int) -> dict[str, Any]:
        rows = [
            {"name": r.name, "digest": r.digest, "origin": "note", "score": 1.0}
            for r in self.memory.records(notebook.id)
        ]
        return {"rows": rows[:limit], "pending": 0}


def make_host(directory: Path, clock: Callable[[], datetime] | None = None, **options: Any) -> Host:
    return Host(
        SqliteMemoryStore(directory / "memory.db"),
        SqliteKnowledgeStore(directory / "knowledge.db"),
        SqliteHostRegistry(directory / "knowledge.db"),
        clock=clock or Clock(),
        **options,
    )


def close(host: Host) -> None:
    host.stop()
    host.close()


def open_run(host: Host, run: str, document: str = "doc", owner: str = "ann") -> tuple[str, str]:
    """``(notebook id, agent token)`` of a fresh run."""
    host.register_document(owner, document)
    notebook, _ = host.open_notebook(owner, document, run)
    return notebook.id, host.agent_token(notebook.id)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def host(tmp_path: Path, clock: Clock) -> Iterator[Host]:
    host = make_host(tmp_path, clock)
    yield host
    close(host)


@pytest.fixture
def agent(host: Host) -> tuple[str, str]:
    return open_run(host, "run-1")


def run(scenario: Callable[[], Awaitable[None]]) -> None:
    anyio.run(scenario)


def body(result: types.CallToolResult) -> dict[str, Any]:
    """The tool's JSON object, checked to be the same as text and as structured content."""
    assert len(result.content) == 1
    content = result.content[0]
    assert isinstance(content, types.TextContent)
    parsed = json.loads(content.text)
    assert parsed == result.structured_content
    assert result.is_error == ("error" in parsed)
    return dict(parsed)


def ok(result: types.CallToolResult, tool: str) -> dict[str, Any]:
    parsed = body(result)
    assert not result.is_error, parsed
    CHECK_RESULT[tool](parsed)
    return parsed


def error(result: types.CallToolResult) -> str:
    parsed = body(result)
    assert result.is_error, parsed
    CHECK_RESULT["error"](parsed)
    return str(parsed["error"]["code"])


def note(name: str, text: str, **links: list[str]) -> dict[str, Any]:
    return {"op": "add", "record": {"name": name, "text": text, **links}}


def remember(based_on: int, request_id: str, *changes: dict[str, Any]) -> dict[str, Any]:
    return {"based_on": based_on, "request_id": request_id, "changes": list(changes)}


async def call_raw(client: Client, name: str, arguments: Any) -> types.CallToolResult:
    """A tools/call whose ``arguments`` need not be an object, as a careless agent may send."""
    params = types.CallToolRequestParams.model_construct(name=name, arguments=arguments)
    request = types.CallToolRequest(params=params)
    with warnings.catch_warnings():  # pydantic notes the non-object it is asked to send
        warnings.simplefilter("ignore", UserWarning)
        return await client.session.send_request(request, types.CallToolResult)


# -- in process ---------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_the_agent_gets_exactly_the_four_tools_with_the_published_schemas(
    host: Host, agent: tuple[str, str], mode: str
) -> None:
    async def scenario() -> None:
        async with Client(build_server(host, agent_token=agent[1]), mode=mode) as client:
            tools = (await client.list_tools()).tools
            assert [tool.name for tool in tools] == FOUR
            for tool in tools:
                assert tool.input_schema == ARGUMENTS[tool.name]
                assert tool.output_schema == {"type": "object", **RESULTS[tool.name]}
                assert tool.description == DESCRIPTIONS[tool.name]
                assert tool.meta == {"oh/tool_contract_version": TOOL_CONTRACT_VERSION}

    run(scenario)


def test_recall_is_a_fifth_tool_only_when_the_host_enables_it(host: Host, tmp_path: Path) -> None:
    recall = FakeRecall()
    recall_host = make_host(tmp_path, recall=recall, settings=HostSettings(recall_shadow=False))
    recall.memory = recall_host._memory
    _, token = open_run(recall_host, "run-1")

    async def scenario() -> None:
        async with Client(build_server(host, agent_token=token)) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == FOUR
            assert error(await client.call_tool("recall", {"text": "reef"})) == "not_found"
        async with Client(build_server(recall_host, agent_token=token)) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert list(tools) == [*FOUR, "recall"]
            assert tools["recall"].input_schema == ARGUMENTS["recall"]
            written = ok(
                await client.call_tool("remember", remember(0, "r-1", note("lead:a", "reef"))),
                "remember",
            )
            found = ok(await client.call_tool("recall", {"text": "reef"}), "recall")
            assert found["rows"] == [{**written["written"][0], "origin": "note", "score": 1.0}]
            assert found["shadow"] is False

    try:
        run(scenario)
    finally:
        close(recall_host)


def test_in_shadow_mode_recall_shows_no_rows(tmp_path: Path) -> None:
    recall = FakeRecall()
    shadow_host = make_host(tmp_path, recall=recall)
    recall.memory = shadow_host._memory
    _, token = open_run(shadow_host, "run-1")

    async def scenario() -> None:
        async with Client(build_server(shadow_host, agent_token=token)) as client:
            ok(
                await client.call_tool("remember", remember(0, "r-1", note("lead:a", "reef"))),
                "remember",
            )
            found = ok(await client.call_tool("recall", {"text": "reef"}), "recall")
            assert found["rows"] == [] and found["shadow"] is True

    try:
        run(scenario)
    finally:
        close(shadow_host)


@pytest.mark.parametrize("mode", MODES)
def test_remember_applies_once_and_an_identical_retry_returns_the_original_result(
    host: Host, agent: tuple[str, str], mode: str
) -> None:
    arguments = remember(0, "r-12", note("lead:dataset", "dataset ends 2014: ruled out"))

    async def scenario() -> None:
        async with Client(build_server(host, agent_token=agent[1]), mode=mode) as client:
            first = ok(await client.call_tool("remember", arguments), "remember")
            assert first["status"] == "applied" and first["version"] == 1
            again = ok(await client.call_tool("remember", arguments), "remember")
            assert again == first
            stale = remember(0, "r-13", note("lead:other", "a second note"))
            refused = ok(await client.call_tool("remember", stale), "remember")
            assert refused == {"status": "refused", "reason": "stale", "current_version": 1}
            reused = remember(1, "r-12", note("lead:other", "a second note"))
            assert error(await client.call_tool("remember", reused)) == "request_id_reused"

    run(scenario)
    assert host._memory.notebook(agent[0]).version == 1


def test_query_read_and_explain_answer_like_the_tools(host: Host, agent: tuple[str, str]) -> None:
    async def scenario() -> None:
        async with Client(build_server(host, agent_token=agent[1])) as client:
            changes = [
                note("finding:threshold", "bleaching above 1 degree"),
                note("lead:survey", "methods missing", depends_on=["finding:threshold"]),
            ]
            ok(await client.call_tool("remember", remember(0, "r-1", *changes)), "remember")
            answer = ok(
                await client.call_tool("query", {"question": "depends_on", "name": "lead:survey"}),
                "query",
            )
            assert [row["name"] for row in answer["rows"]] == ["finding:threshold"]
            why = ok(
                await client.call_tool("explain", {"token": answer["token"], "row": 0}), "explain"
            )
            assert why["path"] == ["lead:survey", "depends_on", "finding:threshold"]
            digest = answer["rows"][0]["digest"]
            read = ok(
                await client.call_tool("read", {"name": "finding:threshold", "digest": digest}),
                "read",
            )
            assert read["text"] == "bleaching above 1 degree" and read["changed"] is False
            assert read["author"] == "agent:run-1"
            assert error(await client.call_tool("explain", {"token": "x.y", "row": 0})) == (
                "token_invalid"
            )
            assert error(await client.call_tool("query", {"question": "why"})) == (
                "unknown_question"
            )

    run(scenario)


@pytest.mark.parametrize(
    ("tool", "arguments", "code"),
    [
        ("read", {"name": "lead:a", "author": "me"}, "invalid_argument"),
        (
            "remember",
            {**remember(0, "r-1", note("lead:a", "x")), "written_at": "now"},
            "invalid_argument",
        ),
        ("read", {}, "invalid_argument"),
        ("read", {"name": 5}, "invalid_argument"),
        ("query", {"question": "current_notes", "limit": "5"}, "invalid_argument"),
        (
            "remember",
            remember(0, "r-1", *(note(f"lead:n{i}", "x") for i in range(65))),
            "too_many_changes",
        ),
        ("read", {"name": "lead:nothing"}, "not_found"),
        ("forget", {}, "not_found"),
        ("bootstrap", {}, "not_found"),
        ("recall", {"text": "reef"}, "not_found"),
    ],
)
def test_bad_calls_are_error_results_with_their_code(
    host: Host, agent: tuple[str, str], tool: str, arguments: dict[str, Any], code: str
) -> None:
    async def scenario() -> None:
        async with Client(build_server(host, agent_token=agent[1])) as client:
            assert error(await client.call_tool(tool, arguments)) == code

    run(scenario)


def test_malformed_arguments_never_crash_the_session(host: Host, agent: tuple[str, str]) -> None:
    deep: Any = "x"
    for _ in range(200):
        deep = [deep]

    async def scenario() -> None:
        async with Client(build_server(host, agent_token=agent[1])) as client:
            for arguments in ([1, 2], "read lead:a", 7, True, [], [{"name": "lead:a"}]):
                assert error(await call_raw(client, "read", arguments)) == "invalid_argument"
            assert error(await call_raw(client, "nothing", [1])) == "not_found"
            for arguments in (
                None,
                {"name": "lead:a" * 10_000},
                {"name": "\ud800"},
                {"name": "lead:a", "origin": deep},
                {"question": None, "name": {"$ref": "#"}},
                {"based_on": -1, "request_id": "", "changes": "all"},
                {"based_on": 10**40, "request_id": "r", "changes": [{"op": "drop"}]},
                {"changes": [{"op": "add", "record": {"name": "lead:a", "text": 1.5e308}}]},
            ):
                for tool in FOUR:
                    assert error(await client.call_tool(tool, arguments)) in (
                        "invalid_argument",
                        "not_found",
                    )
            written = await client.call_tool("remember", remember(0, "r-1", note("lead:a", "ok")))
            assert ok(written, "remember")["version"] == 1

    run(scenario)


def test_every_refusal_of_the_caller_is_an_error_result(
    host: Host, agent: tuple[str, str], clock: Clock
) -> None:
    _, other_token = open_run(host, "run-2")

    async def scenario() -> None:
        read = {"name": "lead:a"}
        for token in (None, "", "oha_garbage", "oha_x.y", agent[1] + "0", "oho_owner"):
            async with Client(build_server(host, agent_token=token)) as client:
                assert error(await client.call_tool("read", read)) == "unauthenticated"
        server = build_server(host, agent_token=other_token, notebook_id=agent[0])
        async with Client(server) as client:
            assert error(await client.call_tool("read", read)) == "forbidden"
        async with Client(build_server(host, agent_token=agent[1])) as client:
            clock.now += timedelta(hours=25)
            assert error(await client.call_tool("read", read)) == "expired"
            clock.now -= timedelta(hours=25)
            host.forget("ann", agent[0])
            for tool, arguments in [
                ("read", read),
                ("query", {"question": "current_notes"}),
                ("remember", remember(0, "late", note("lead:late", "too late"))),
            ]:
                assert error(await client.call_tool(tool, arguments)) == "purged"
        async with Client(build_server(host, agent_token=other_token)) as client:
            host.remove_document("ann", "doc")
            assert error(await client.call_tool("read", read)) == "forbidden"

    run(scenario)


def test_the_bootstrap_is_handed_over_in_the_instructions_and_as_a_resource(
    host: Host, agent: tuple[str, str]
) -> None:
    server = build_server(host, agent_token=agent[1])

    async def scenario() -> None:
        async with Client(server) as client:
            ok(
                await client.call_tool("remember", remember(0, "r-1", note("lead:a", "x"))),
                "remember",
            )
        expected = host.bootstrap(agent[1])
        assert expected["total"] == 1
        for mode in MODES:
            async with Client(server, mode=mode) as client:
                instructions = client.instructions or ""
                assert BOOTSTRAP_URI in instructions
                assert json.loads(instructions.splitlines()[-1]) == expected
                listed = (await client.list_resources()).resources
                assert [str(resource.uri) for resource in listed] == [BOOTSTRAP_URI]
                contents = (await client.read_resource(BOOTSTRAP_URI)).contents
                assert len(contents) == 1 and isinstance(contents[0], types.TextResourceContents)
                assert contents[0].mime_type == "application/json"
                assert json.loads(contents[0].text) == expected
                CHECK_RESULT["bootstrap"](expected)
                with pytest.raises(MCPError):
                    await client.read_resource("oh://nothing")
                ok(await client.call_tool("query", {"question": "current_notes"}), "query")

    run(scenario)


def test_without_a_credential_the_bootstrap_says_why(host: Host) -> None:
    async def scenario() -> None:
        async with Client(build_server(host)) as client:
            assert json.loads((client.instructions or "").splitlines()[-1])["error"]["code"] == (
                "unauthenticated"
            )
            contents = (await client.read_resource(BOOTSTRAP_URI)).contents
            assert isinstance(contents[0], types.TextResourceContents)
            assert json.loads(contents[0].text)["error"]["code"] == "unauthenticated"

    run(scenario)


# -- stdio: `oh mcp --notebook ID` ---------------------------------------------------------


def _environment(token: str | None) -> dict[str, str]:
    env = {"PYTHONPATH": str(ROOT / "src"), "PYTHONUNBUFFERED": "1"}
    if token is not None:
        env["OH_AGENT_TOKEN"] = token
    return env


def _prepared(directory: Path) -> tuple[str, str, str]:
    """A data directory with two open notebooks, prepared through ``Host`` and closed again."""
    host = make_host(directory, system_clock)  # the child process runs on the real clock
    try:
        first, token = open_run(host, "run-1")
        _, other_token = open_run(host, "run-2")
    finally:
        close(host)
    return first, token, other_token


def test_oh_mcp_serves_one_notebook_over_stdio(tmp_path: Path) -> None:
    notebook, token, _ = _prepared(tmp_path)
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "oh.cli", "mcp", "--notebook", notebook, "--data", str(tmp_path)],
        env=_environment(token),
        cwd=str(tmp_path),
    )

    async def scenario() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with Client(stdio_client(parameters, errlog=errlog)) as client:
                assert json.loads((client.instructions or "").splitlines()[-1])["total"] == 0
                # Recall in shadow mode is the embedded backend's default, as for `oh serve`.
                assert [tool.name for tool in (await client.list_tools()).tools] == [
                    *FOUR,
                    "recall",
                ]
                changes = [
                    note("lead:a", "survey"),
                    note("lead:b", "ruled out", supports=["lead:a"]),
                ]
                written = ok(
                    await client.call_tool("remember", remember(0, "r-1", *changes)), "remember"
                )
                assert (
                    ok(await client.call_tool("remember", remember(0, "r-1", *changes)), "remember")
                    == written
                )
                answer = ok(
                    await client.call_tool("query", {"question": "supports", "name": "lead:a"}),
                    "query",
                )
                assert [row["name"] for row in answer["rows"]] == ["lead:b"]
                why = ok(
                    await client.call_tool("explain", {"token": answer["token"], "row": 0}),
                    "explain",
                )
                assert why["name"] == "lead:b"
                assert (
                    ok(await client.call_tool("read", {"name": "lead:b"}), "read")["text"]
                    == "ruled out"
                )
                assert error(await call_raw(client, "read", ["lead:b"])) == "invalid_argument"
                assert error(await client.call_tool("read", {"name": "lead:b", "x": 1})) == (
                    "invalid_argument"
                )
                contents = (await client.read_resource(BOOTSTRAP_URI)).contents
                assert isinstance(contents[0], types.TextResourceContents)
                assert json.loads(contents[0].text)["total"] == 2

    run(scenario)
    host = make_host(tmp_path, system_clock)
    try:
        assert host._memory.notebook(notebook).version == 1
    finally:
        close(host)


@pytest.mark.parametrize(
    ("options", "environment", "tools", "shadow"),
    [
        ([], {}, [*FOUR, "recall"], True),
        (["--recall", "off"], {}, FOUR, None),
        ([], {"OH_RECALL": "off"}, FOUR, None),
        (["--recall", "on", "--recall-deadline", "5"], {}, [*FOUR, "recall"], False),
        ([], {"OH_RECALL": "shadow", "OH_RECALL_DEADLINE": "5"}, [*FOUR, "recall"], True),
    ],
    ids=["default", "off", "off-by-env", "on", "shadow-by-env"],
)
def test_oh_mcp_offers_recall_exactly_when_the_serve_configuration_enables_it(
    tmp_path: Path,
    options: list[str],
    environment: dict[str, str],
    tools: list[str],
    shadow: bool | None,
) -> None:
    notebook, token, _ = _prepared(tmp_path)
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "oh.cli", "mcp", "--notebook", notebook, "--data", str(tmp_path), *options],
        env={**_environment(token), **environment},
        cwd=str(tmp_path),
    )

    async def scenario() -> None:
        with (tmp_path / "stderr.log").open("w") as errlog:
            async with Client(stdio_client(parameters, errlog=errlog)) as client:
                assert [tool.name for tool in (await client.list_tools()).tools] == tools
                result = await client.call_tool("recall", {"text": "reef"})
                if shadow is None:
                    assert error(result) == "not_found"
                else:
                    assert ok(result, "recall")["shadow"] is shadow

    run(scenario)


@pytest.mark.parametrize(
    ("which", "code"),
    [("none", "unauthenticated"), ("garbage", "unauthenticated"), ("other", "forbidden")],
)
def test_oh_mcp_will_not_start_without_the_notebooks_own_token(
    tmp_path: Path, which: str, code: str
) -> None:
    notebook, _, other_token = _prepared(tmp_path)
    token = {"none": None, "garbage": "oha_x.y", "other": other_token}[which]
    environment = {k: v for k, v in os.environ.items() if k != "OH_AGENT_TOKEN"}
    done = subprocess.run(
        [sys.executable, "-m", "oh.cli", "mcp", "--notebook", notebook, "--data", str(tmp_path)],
        env={**environment, **_environment(token)},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"oh mcp: {code}:" in done.stderr
    assert done.stdout == ""


# -- streamable HTTP -----------------------------------------------------------------------


@pytest.fixture
def http_url(host: Host) -> Iterator[str]:
    """The endpoint mounted in a minimal Starlette app, served by uvicorn in a thread."""
    endpoint = mcp_app(host)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        async with endpoint.lifespan():
            yield

    app = Starlette(routes=[Route("/mcp", endpoint=endpoint.app)], lifespan=lifespan)
    with in_thread(app) as url:
        yield f"{url}/mcp"


@contextlib.asynccontextmanager
async def http_client(url: str, token: str | None, mode: str = "auto") -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(url, http_client=http), mode=mode) as client,
    ):
        yield client


@pytest.mark.parametrize("mode", MODES)
def test_over_http_the_bearer_token_selects_the_notebook(
    host: Host, http_url: str, mode: str
) -> None:
    _, ann = open_run(host, "run-1")
    _, bob = open_run(host, "run-1", document="bob-doc", owner="bob")

    async def scenario() -> None:
        async with http_client(http_url, ann, mode) as client:
            assert [tool.name for tool in (await client.list_tools()).tools] == FOUR
            ok(
                await client.call_tool("remember", remember(0, "r-1", note("lead:ann", "a"))),
                "remember",
            )
        async with http_client(http_url, bob, mode) as client:
            assert json.loads((client.instructions or "").splitlines()[-1])["total"] == 0
            ok(
                await client.call_tool("remember", remember(0, "r-1", note("lead:bob", "b"))),
                "remember",
            )
            answer = ok(await client.call_tool("query", {"question": "current_notes"}), "query")
            assert [row["name"] for row in answer["rows"]] == ["lead:bob"]
            assert error(await client.call_tool("read", {"name": "lead:ann"})) == "not_found"
        async with http_client(http_url, ann, mode) as client:
            bootstrap = json.loads((client.instructions or "").splitlines()[-1])
            assert [row["name"] for row in bootstrap["rows"]] == ["lead:ann"]
            answer = ok(await client.call_tool("query", {"question": "current_notes"}), "query")
            assert [row["name"] for row in answer["rows"]] == ["lead:ann"]
            assert ok(await client.call_tool("read", {"name": "lead:ann"}), "read")["text"] == "a"
            assert error(await client.call_tool("read", {"name": "lead:bob"})) == "not_found"
            # An explain token is bound to its notebook: bob's agent cannot use ann's.
            token = answer["token"]
        async with http_client(http_url, bob, mode) as client:
            assert error(await client.call_tool("explain", {"token": token, "row": 0})) == (
                "token_invalid"
            )
        for credential in (None, "oha_x.y", "oho_not-an-agent"):
            async with http_client(http_url, credential, mode) as client:
                assert error(await client.call_tool("read", {"name": "lead:ann"})) == (
                    "unauthenticated"
                )

    run(scenario)


def test_over_http_malformed_requests_are_answered_and_the_endpoint_keeps_serving(
    host: Host, http_url: str
) -> None:
    _, token = open_run(host, "run-1")
    headers = {
        "Accept": "application/json, text/event-stream",
        "Authorization": f"Bearer {token}",
    }

    def post(payload: Any, *, raw: bytes | None = None, **extra: str) -> httpx.Response:
        return httpx.post(
            http_url,
            content=raw if raw is not None else json.dumps(payload).encode(),
            headers={**headers, "Content-Type": "application/json", **extra},
            timeout=20,
        )

    for arguments in ([1], "x", None, {"name": "lead:a", "digest": 5}):
        call = {"name": "read", "arguments": arguments}
        answered = post({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call})
        assert answered.status_code == 200, answered.text
        result = answered.json()["result"]
        assert result["isError"] is True
        assert result["structuredContent"]["error"]["code"] == "invalid_argument"
    for raw in (b"{nope", b"[]", b'{"jsonrpc": "2.0"}', b"\xff\xfe", b"1e999999"):
        assert 400 <= post(None, raw=raw).status_code < 500
    for arguments_text in (
        '{"name": "lead:\\ud800"}',
        '{"based_on": NaN, "request_id": "r", "changes": []}',
        '{"name": "lead:a", "name": "lead:b", "origin": {"deep": [[[[[[[[[[1]]]]]]]]]]}}',
    ):
        call = f'{{"name": "read", "arguments": {arguments_text}}}'
        raw = f'{{"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {call}}}'
        answered = post(None, raw=raw.encode())
        assert answered.status_code < 500, answered.text
        if answered.status_code == 200 and "result" in answered.json():
            result = answered.json()["result"]
            assert result["isError"] is True
            assert result["structuredContent"]["error"]["code"] == "invalid_argument"
    unauthenticated = post(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "read", "arguments": {"name": "lead:a"}},
        },
        Authorization="Basic YW5uOnB3",
    )
    assert (
        unauthenticated.json()["result"]["structuredContent"]["error"]["code"] == "unauthenticated"
    )
    # The scheme is read in any case (the parser HTTP and the panel use too).
    lower = post(
        {
            "jsonrpc": "2.0",
            "id": 4,
            "method": "tools/call",
            "params": {"name": "query", "arguments": {"question": "current_notes"}},
        },
        Authorization=f"bearer  {token}",
    )
    assert "error" not in lower.json()["result"]["structuredContent"], lower.text

    async def scenario() -> None:
        async with http_client(http_url, token) as client:
            ok(
                await client.call_tool("remember", remember(0, "r-1", note("lead:a", "x"))),
                "remember",
            )

    run(scenario)


def test_reads_run_on_the_event_loop_answer_exactly_as_reads_in_a_thread(
    host: Host, agent: tuple[str, str]
) -> None:
    """``reads_inline`` (what ``oh serve`` uses on the embedded database) changes where a read
    runs, never what it answers: the same calls, in order, give the same results."""
    changes = [
        note("finding:threshold", "bleaching above 1 degree"),
        note("lead:survey", "methods missing", depends_on=["finding:threshold"]),
    ]
    assert host.call_tool(agent[1], "remember", remember(0, "r-1", *changes))["version"] == 1
    calls: list[tuple[str, Any]] = [
        ("read", {"name": "lead:survey"}),
        ("read", {"name": "lead:nowhere"}),
        ("read", {"name": 5}),
        ("read", {"name": "lead:survey", "unknown": 1}),
        ("query", {"question": "depends_on", "name": "lead:survey"}),
        ("query", {"question": "no such question"}),
        ("explain", {"token": "not-a-token", "row": 0}),
        ("bootstrap", {}),
    ]

    async def answers(inline: bool) -> list[Any]:
        server = build_server(host, agent_token=agent[1], reads_inline=inline)
        async with Client(server) as client:
            results = []
            for tool, arguments in calls:
                result = await client.call_tool(tool, arguments)
                results.append((result.is_error, body(result)))
            query = results[4][1]
            explained = await client.call_tool("explain", {"token": query["token"], "row": 0})
            results.append((explained.is_error, body(explained)))
            return results

    async def scenario() -> None:
        inline = await answers(True)
        assert inline == await answers(False)
        assert not inline[0][0] and inline[1][1]["error"]["code"] == "not_found"
        assert inline[2][1]["error"]["code"] == "invalid_argument"

    run(scenario)
