"""The MCP endpoint (docs/mcp.md): the agent's tools over the Model Context Protocol.

A thin adapter over ``Host``, on the official SDK's low-level ``Server``: each tool is listed
with its published JSON Schemas (``oh.tools.schemas``) and every call goes to
``Host.call_tool`` with the arguments exactly as the agent sent them, so Oh — not the SDK —
validates them. (The SDK's ``MCPServer`` derives schemas from Python signatures and coerces
arguments with pydantic before a tool sees them, which is why it is not used here.) Results are
the tool's JSON object as text content and as structured content; errors are results with
``isError`` set and the same ``{"error": {"code", "message"}}`` body, never protocol errors.

Every message is read by Oh's own JSON reader before the SDK sees it (``screen``): the one every
transport shares (``oh.core.canonical.parse_input``: duplicate keys, NaN and lone surrogates
refused, ``5.0`` read as 5), so one request body means the same thing over HTTP, MCP and stdio.
A message it refuses never reaches a tool: the call answers ``invalid_argument``, as HTTP does.

The agent credential selects the notebook: on streamable HTTP it is the ``Authorization:
Bearer`` header of every request, over stdio the token ``oh mcp`` was started with. The
bootstrap (``current_notes`` once, names and digests only) is handed over when the agent
connects, in the server instructions of that connection, and can be read again at any time as
the resource ``oh://bootstrap``. See ``docs/mcp.md``.
"""

from __future__ import annotations

import copy
import json
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager
from typing import Any, NamedTuple, cast

import anyio
import anyio.to_thread
import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import (
    StreamableHTTPASGIApp,
    StreamableHTTPSessionManager,
)
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError
from starlette.requests import Request
from starlette.types import ASGIApp

from oh._version import __version__
from oh.core.canonical import MAX_INPUT_DEPTH, nested_deeper_than, parse_input
from oh.errors import InvalidArgument, NotFound
from oh.host import Host, bearer_token
from oh.services.access import AGENT_TOKEN_ENV
from oh.tools import TOOLS, Tool, inline_tools
from oh.tools.schemas import TOOL_CONTRACT_VERSION

__all__ = [
    "AGENT_TOKEN_ENV",
    "BOOTSTRAP_URI",
    "DESCRIPTIONS",
    "McpEndpoint",
    "build_server",
    "mcp_app",
    "run_stdio",
    "screen",
    "serve_stdio",
    "tool_names",
]


BOOTSTRAP_URI = "oh://bootstrap"

# What each tool tells the agent, as its declaration says (``oh.tools``).
DESCRIPTIONS: dict[str, str] = {name: tool.description for name, tool in TOOLS.items()}


def _annotations(tool: Tool[Any]) -> types.ToolAnnotations:
    """MCP's hints, from the tool's flags: a tool that only reads says so; one that writes says
    whether it may remove data and whether a retry changes nothing more."""
    if tool.read_only:
        return types.ToolAnnotations(title=tool.title, read_only_hint=True, open_world_hint=False)
    return types.ToolAnnotations(
        title=tool.title,
        read_only_hint=False,
        destructive_hint=tool.destructive,
        idempotent_hint=tool.idempotent,
        open_world_hint=False,
    )


INSTRUCTIONS = (
    "Oh is your working memory for this run: private notes that expire with the run, kept "
    "apart from reviewed knowledge that you can read but never change. Query answers give "
    "names and digests; read a record before you rely on it, and remember with based_on set "
    "to the version you last read. Every error is a tool result "
    '{"error": {"code", "message"}}; stale writes are refused results, never errors.'
)


# Where ``screen`` leaves its verdict on a message it refused: in the request's ``_meta``, under a
# key a client cannot set (``screen`` removes it from every message that it lets through).
REFUSED = "oh/refused"


def _without_verdict(message: Any) -> None:
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    if isinstance(meta, dict):
        meta.pop(REFUSED, None)


def _refused(raw: bytes, reason: str) -> bytes:
    """``raw`` with the verdict on it, when it is a request the SDK can answer; otherwise as it
    came (the SDK then answers its own parse error, and no tool runs)."""
    try:
        message = json.loads(raw.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        return raw
    if not (isinstance(message, dict) and "id" in message and type(message.get("method")) is str):
        return raw
    params = message.get("params")
    params = dict(params) if isinstance(params, dict) else {}
    meta = params.get("_meta")
    params["_meta"] = {**(meta if isinstance(meta, dict) else {}), REFUSED: reason}
    if message["method"] == "tools/call":
        params["arguments"] = {}  # what was refused goes no further, not even to the SDK
    message["params"] = params
    return json.dumps(message).encode()


def screen(raw: bytes) -> bytes:
    """One JSON-RPC message as Oh reads it, ready for the SDK.

    Read by ``parse_input``, then written out again, so the SDK parses exactly the values Oh read. A
    message Oh refuses carries the reason in ``params._meta["oh/refused"]`` instead, which the
    server answers before any handler runs: a tool call with ``invalid_argument``, anything else
    with a JSON-RPC error.
    """
    try:
        # The arguments sit two levels into a message (three in a batch): the body limit
        # counts from them, as it counts from an HTTP body.
        message = parse_input(raw, "request body", envelope=3)
        for item in message if isinstance(message, list) else [message]:
            _without_verdict(item)
            params = item.get("params") if isinstance(item, dict) else None
            arguments = params.get("arguments") if isinstance(params, dict) else None
            if isinstance(arguments, dict | list) and nested_deeper_than(
                arguments, MAX_INPUT_DEPTH
            ):
                raise InvalidArgument(f"request body: nested deeper than {MAX_INPUT_DEPTH} levels")
    except InvalidArgument as exc:
        return _refused(raw, exc.message)
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class _Screened:
    """An ASGI app behind ``screen``: a POST's whole body (the host limits its size) is read,
    screened and handed on in its place. An object, not a function, so that a router mounts it
    as an app rather than calling it as a request handler."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before it finished sending
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = screen(b"".join(chunks))
        headers = [(k, v) for k, v in scope.get("headers", []) if k != b"content-length"]
        headers.append((b"content-length", str(len(body)).encode()))
        delivered = False

        async def replay() -> Any:
            nonlocal delivered
            if delivered:
                return await receive()
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app({**scope, "headers": headers}, replay, send)


class _ScreenedLines:
    """stdin as ``stdio_server`` reads it, each line screened first."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self.source:
            raw = line.rstrip(b"\r\n")
            if raw.strip():
                yield screen(raw).decode("utf-8", "replace") + "\n"


def tool_names(host: Host) -> tuple[str, ...]:
    """The tools an agent of ``host`` gets: recall only when the host has it enabled."""
    enabled = host.recall_enabled
    return tuple(name for name, tool in TOOLS.items() if enabled or not tool.needs_recall)


def _output_schema(tool: str) -> dict[str, Any]:
    # MCP before 2026-07-28 wants an object schema at the root; remember's is a oneOf of two
    # objects, so saying "object" there as well changes nothing it accepts.
    schema = copy.deepcopy(TOOLS[tool].result)
    schema.setdefault("type", "object")
    return schema


def _result(body: dict[str, Any]) -> types.CallToolResult:
    # ensure_ascii keeps the text content plain ASCII whatever the agent sent.
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(body))],
        structured_content=body,
        is_error="error" in body,
    )


class _Adapter:
    """The MCP handlers of one ``Host``. ``agent_token`` and ``notebook_id`` are fixed for
    stdio and in-process use; on HTTP each request brings its own token."""

    def __init__(
        self,
        host: Host,
        agent_token: str | None,
        notebook_id: str | None,
        inline: frozenset[str] = frozenset(),
    ) -> None:
        self.host = host
        self.agent_token = agent_token
        self.notebook_id = notebook_id
        self.inline = inline
        self.tools = tool_names(host)
        # The SDK asks for a tool's input schema on every call: copied once, not each time.
        self._input_schemas = {tool: copy.deepcopy(TOOLS[tool].arguments) for tool in self.tools}

    def token(self, ctx: ServerRequestContext[Any, Any]) -> str | None:
        if isinstance(ctx.request, Request):
            return bearer_token(ctx.request.headers)
        return self.agent_token

    async def call(
        self, ctx: ServerRequestContext[Any, Any], tool: str, arguments: Any
    ) -> dict[str, Any]:
        """Run ``tool`` (or the bootstrap) for the caller of this request."""
        token = self.token(ctx)
        # Host.call_tool turns every error into a body: it is this transport's catch-all.
        if tool in self.inline:
            # A read on an embedded database is shorter than the hop to a thread.
            return self.host.call_tool(token, tool, arguments, self.notebook_id)
        # Host and storage block; the event loop keeps serving other agents meanwhile.
        return await anyio.to_thread.run_sync(
            self.host.call_tool, token, tool, arguments, self.notebook_id
        )

    # -- tools ----------------------------------------------------------------------------

    def input_schema(self, tool: str) -> dict[str, Any] | None:
        return self._input_schemas.get(tool)

    async def list_tools(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=tool,
                    title=TOOLS[tool].title,
                    description=TOOLS[tool].description,
                    input_schema=copy.deepcopy(TOOLS[tool].arguments),
                    output_schema=_output_schema(tool),
                    annotations=_annotations(TOOLS[tool]),
                    _meta={"oh/tool_contract_version": TOOL_CONTRACT_VERSION},
                )
                for tool in self.tools
            ]
        )

    async def call_tool(
        self, ctx: ServerRequestContext[Any, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        # Absent arguments are an empty object in MCP; Oh then names what is missing.
        arguments = {} if params.arguments is None else params.arguments
        return await self.tool_result(ctx, params.name, arguments)

    async def tool_result(
        self, ctx: ServerRequestContext[Any, Any], tool: str, arguments: Any
    ) -> types.CallToolResult:
        if tool not in self.tools:  # "bootstrap" too: it is handed over, not called
            listed = ", ".join(self.tools)
            return _result(NotFound(f"no tool {tool!r}; the tools are {listed}").to_json())
        return _result(await self.call(ctx, tool, arguments))

    # -- the bootstrap --------------------------------------------------------------------

    async def list_resources(
        self, ctx: ServerRequestContext[Any, Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=BOOTSTRAP_URI,
                    name="bootstrap",
                    title="Bootstrap: this notebook at a glance",
                    description=(
                        "current_notes run on your behalf when read: at most 24 rows or 4,000 "
                        "characters, names and digests only, saying whether it was cut and how "
                        "many rows exist."
                    ),
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(
        self, ctx: ServerRequestContext[Any, Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        if params.uri != BOOTSTRAP_URI:
            raise MCPError(
                code=types.INVALID_PARAMS,
                message=f"no resource {params.uri}; the only one is {BOOTSTRAP_URI}",
                data={"uri": params.uri},
            )
        body = await self.call(ctx, "bootstrap", None)
        text = json.dumps(body)
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(
                    uri=BOOTSTRAP_URI, mime_type="application/json", text=text
                )
            ]
        )

    async def instructions(self, ctx: ServerRequestContext[Any, Any]) -> str:
        body = await self.call(ctx, "bootstrap", None)
        if "error" in body:
            said = "The bootstrap is not available"
        else:
            said = "The bootstrap (current_notes when you connected, names and digests only)"
        return (
            f"{INSTRUCTIONS}\n\n{said}; read {BOOTSTRAP_URI} for it at any time:\n"
            f"{json.dumps(body)}"
        )

    # -- middleware -----------------------------------------------------------------------

    async def __call__(
        self, ctx: ServerRequestContext[Any, Any], call_next: CallNext
    ) -> HandlerResult:
        """Runs before the SDK looks at a request: hands a call whose arguments are not an
        object to Oh (the SDK would answer a protocol error), and puts the caller's bootstrap
        into the instructions of the connection (``initialize``, or ``server/discover`` from
        2026-07-28 on)."""
        params = ctx.params
        meta = params.get("_meta") if isinstance(params, Mapping) else None
        if isinstance(meta, Mapping) and REFUSED in meta:
            refusal = InvalidArgument(str(meta[REFUSED]))
            if ctx.method == "tools/call":
                return _result(refusal.to_json())
            raise MCPError(code=types.INVALID_PARAMS, message=refusal.message)
        if ctx.method == "tools/call" and isinstance(params, Mapping):
            name, arguments = params.get("name"), params.get("arguments")
            if type(name) is str and arguments is not None and not isinstance(arguments, Mapping):
                return await self.tool_result(ctx, name, arguments)
        result = await call_next(ctx)
        if ctx.method in ("initialize", "server/discover") and isinstance(result, dict):
            result = {**result, "instructions": await self.instructions(ctx)}
        return result


def build_server(
    host: Host,
    *,
    agent_token: str | None = None,
    notebook_id: str | None = None,
    reads_inline: bool = False,
) -> Server[Any]:
    """The MCP server of ``host``. With ``agent_token`` (stdio, in-process clients) every call
    uses that credential, and with ``notebook_id`` it must belong to that notebook; over HTTP
    the request's bearer token is used instead. ``reads_inline`` runs the tools declared
    ``inline`` (``read``, ``explain``) on the event loop rather than in a thread
    (``oh.transports.http.create_app`` says when)."""
    adapter = _Adapter(
        host, agent_token, notebook_id, inline_tools() if reads_inline else frozenset()
    )
    server: Server[Any] = Server(
        "oh",
        version=__version__,
        title="Oh working memory",
        instructions=INSTRUCTIONS,
        # Lets the SDK find a tool's schema without running tools/list for every call.
        get_tool_input_schema=adapter.input_schema,
        on_list_tools=adapter.list_tools,
        on_call_tool=adapter.call_tool,
        on_list_resources=adapter.list_resources,
        on_read_resource=adapter.read_resource,
    )
    server.middleware.append(adapter)
    return server


class McpEndpoint(NamedTuple):
    """Streamable HTTP: ``app`` answers at ``/mcp``; ``lifespan()`` must be running meanwhile
    (enter it once, in the web app's lifespan)."""

    app: ASGIApp
    lifespan: Callable[[], AbstractAsyncContextManager[None]]


def mcp_app(
    host: Host,
    *,
    security: TransportSecuritySettings | None = None,
    reads_inline: bool = False,
) -> McpEndpoint:
    """The streamable HTTP endpoint of ``host``, to mount at ``/mcp``.

    Stateless and with JSON responses: no MCP session lives in the process, so any number of
    ``oh serve`` processes can answer one agent, and the bearer token of each request selects
    the notebook. ``security`` turns on the SDK's DNS-rebinding checks (Host/Origin lists); an
    agent token travels in a header, never in a cookie, so a browser cannot lend one.
    ``reads_inline`` as for ``build_server``.
    """
    manager = StreamableHTTPSessionManager(
        app=build_server(host, reads_inline=reads_inline),
        stateless=True,
        json_response=True,
        security_settings=security,
    )
    return McpEndpoint(_Screened(StreamableHTTPASGIApp(manager)), manager.run)


async def serve_stdio(host: Host, notebook_id: str, agent_token: str) -> None:
    """Serve one notebook's tools over this process's stdin and stdout until the client leaves."""
    server = build_server(host, agent_token=agent_token, notebook_id=notebook_id)
    stdin = cast(Any, _ScreenedLines(anyio.wrap_file(sys.stdin.buffer)))
    async with stdio_server(stdin=stdin) as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_stdio(host: Host, notebook_id: str, agent_token: str) -> None:
    anyio.run(serve_stdio, host, notebook_id, agent_token)
