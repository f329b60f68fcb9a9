"""The HTTP API of the reference host (docs/http.md, docs/tools.md): a thin adapter over ``Host``.

Every route reads its body itself, strictly (JSON content type first, then the size limit,
then the reader every transport shares, ``oh.core.canonical.parse_input``), so every bad input
becomes a typed error with a stable code. An owner route's body is checked against its published
schema (``oh.tools.schemas.BODIES``); a tool's arguments go to the one parser behind
``Host.call_tool``.
The OpenAPI document carries the schema of every body, parameter and response, the bearer
schemes, and every status a route can answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    Response,
    StreamingResponse,
)
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from oh._version import __version__
from oh.core.canonical import MAX_SAFE_INTEGER, parse_input
from oh.errors import (
    HTTP_STATUS,
    Bug,
    InvalidArgument,
    MethodNotAllowed,
    NotFound,
    OhError,
    UnsupportedMediaType,
    public_error,
)
from oh.host import (
    DEFAULT_LIST_LIMIT,
    MAX_LIST_LIMIT,
    Host,
    MemoryCard,
    bearer_token,
)
from oh.services.notebooks import read_purge_status
from oh.storage.group_commit import Pace
from oh.tools import TOOLS, inline_tools
from oh.tools.schemas import BODIES, RESULTS, TOOL_CONTRACT_VERSION, validate_body
from oh.transports.openapi import publish, reference_page
from oh.transports.panel import PanelCompression, owner_from_request, panel_router

__all__ = ["MAX_BODY_BYTES", "create_app"]

logger = logging.getLogger("oh.http")
MAX_BODY_BYTES = 1_048_576

ERROR = RESULTS["error"]
NOTEBOOK: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "state": {"enum": ["opening", "open", "expired", "purged", "empty"]},
        "started_at": {"type": "string"},
        "forgets_at": {"type": "string"},
        "version": {"type": "integer"},
        "pinned_revision": {"type": ["integer", "null"]},
    },
    "required": ["id", "state", "started_at", "forgets_at", "version", "pinned_revision"],
}
FORGOT_NOTE = {
    "type": "object",
    "properties": {
        "notebook": {"type": "string"},
        "version": {"type": "integer"},
        "removed": {"type": "string"},
    },
    "required": ["notebook", "version", "removed"],
}
LISTED = {
    "type": "object",
    "properties": {
        "notebooks": {
            "type": "array",
            "items": {
                **NOTEBOOK,
                "properties": {
                    **NOTEBOOK["properties"],
                    "document": {"type": "string"},
                    "run": {"type": "string"},
                },
                "required": [*NOTEBOOK["required"], "document", "run"],
            },
        },
        "next_cursor": {"type": ["string", "null"]},
    },
    "required": ["notebooks", "next_cursor"],
}
OPENED = {
    "type": "object",
    "properties": {
        "notebook": NOTEBOOK,
        "agent_token": {"type": "string"},
        "mcp_url": {"type": "string"},
        "bootstrap": RESULTS["bootstrap"],
    },
    "required": ["notebook", "agent_token", "mcp_url", "bootstrap"],
}


def _status_table() -> str:
    """``400 invalid_argument, ...; 401 unauthenticated; ...`` from the one code table."""
    by_status: dict[int, list[str]] = {}
    for code, status in HTTP_STATUS.items():
        by_status.setdefault(status, []).append(code)
    return "; ".join(f"{status} {', '.join(codes)}" for status, codes in sorted(by_status.items()))


def _allowed(app: Any, scope: Any) -> str:
    """Every method some route of ``app`` answers at this path (one route per method, so the
    router's own ``Allow`` names only the first)."""
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches({**scope, "method": "GET"})
        if match != Match.NONE:
            methods |= set(getattr(route, "methods", None) or ())
    return ", ".join(sorted(methods))


def _json(schema: dict[str, Any]) -> dict[str, Any]:
    return {"content": {"application/json": {"schema": schema}}}


def _errors(*statuses: int, body: bool = False) -> dict[int | str, dict[str, Any]]:
    """The error responses of a route: those named, plus what any route can answer (400, and
    503 when storage is unavailable) and, for a route that reads a body, 415."""
    out: dict[int | str, dict[str, Any]] = {}
    for status in sorted({*statuses, 400, 503, *((415,) if body else ())}):
        codes = [code for code, value in HTTP_STATUS.items() if value == status]
        out[status] = {"description": ", ".join(codes), **_json(ERROR)}
    return out


PROPOSED_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {"proposal_id": {"type": "string"}, "created": {"type": "boolean"}},
    "required": ["proposal_id"],
}


def _body_doc(schema: dict[str, Any]) -> dict[str, Any]:
    return {"requestBody": {"required": True, **_json(schema)}}


def _is_json(content_type: str) -> bool:
    media = content_type.partition(";")[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def _body(request: Request) -> Any:
    """The request body as JSON read by the input rule every transport shares
    (``oh.core.canonical.parse_input``), refused before parsing when it is too large or not
    declared as JSON."""
    return await _read_body(request.headers, request.receive)


class _TooLarge(Exception):
    pass


def _error_response(error: OhError) -> JSONResponse:
    return JSONResponse(error.to_json(), status_code=error.http_status)


def _result(body: dict[str, Any], status: int = 200) -> JSONResponse:
    if "error" in body:
        return JSONResponse(body, status_code=HTTP_STATUS.get(body["error"]["code"], 503))
    return JSONResponse(body, status_code=status)


def _limited(inner: Any) -> Any:
    """Wrap an ASGI app so a request body over ``MAX_BODY_BYTES`` is refused before the app
    reads it: a declared length at once, a chunked body as soon as it grows past the limit."""

    refusal = json.dumps(
        InvalidArgument(f"request body over {MAX_BODY_BYTES} bytes", limit=MAX_BODY_BYTES).to_json()
    ).encode()

    async def refuse(send: Any) -> None:
        await send(
            {
                "type": "http.response.start",
                "status": 400,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(refusal)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": refusal})

    async def limited(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await inner(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length" and value.isdigit() and int(value) > MAX_BODY_BYTES:
                await refuse(send)
                return
        seen = 0
        refused = False

        async def limited_receive() -> Any:
            nonlocal seen, refused
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > MAX_BODY_BYTES:
                    refused = True
                    raise _TooLarge()
            return message

        try:
            await inner(scope, limited_receive, send)
        except _TooLarge:
            if refused:
                await refuse(send)

    return _Asgi(limited)


class _Asgi:
    """An ASGI app as an object, so routing calls it with (scope, receive, send) rather than
    treating it as a request handler."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.app(scope, receive, send)


_TOOLS_PREFIX = "/v1/notebooks/"


def _tool_path(path: str) -> tuple[str, str] | None:
    """``(notebook_id, tool)`` when ``path`` is shaped like a tool route
    (``/v1/notebooks/{notebook_id}/tools/{tool}``, the id one non-empty segment), whatever the
    tool's name; else None."""
    if not path.startswith(_TOOLS_PREFIX):
        return None
    notebook_id, _, rest = path[len(_TOOLS_PREFIX) :].partition("/")
    section, _, tool = rest.partition("/")
    if not notebook_id or section != "tools" or not tool:
        return None
    return notebook_id, tool


def _tool_route(path: str) -> tuple[str, str] | None:
    """``(notebook_id, tool)`` when ``path`` is exactly a tool route, as the router matches it;
    else None."""
    route = _tool_path(path)
    return route if route is not None and route[1] in TOOLS else None


class _HostApp(FastAPI):
    """The app, with the hot routes answered before the framework's stack.

    A tool call (``POST /v1/notebooks/{id}/tools/{tool}``) and ``/mcp`` are what agents send
    all the time; routing them through FastAPI's middleware, router (every route matched in
    turn) and dependency solving costs more than the tool itself, and they use none of it: a
    tool route reads its own body and answers its own errors. So they go straight to the same
    handler the declared route runs (``tool_call``), which keeps the route, its OpenAPI entry
    and every other method on that path (405 and its ``Allow``) exactly as declared. A request
    under a ``root_path`` takes the ordinary way."""

    tool_call: Callable[[str, str, Headers, Any], Awaitable[Response]] | None = None
    mcp_route: Any = None

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and not scope.get("root_path") and not self.root_path:
            path = scope["path"]
            method = scope["method"]
            if method == "POST" and self.tool_call is not None:
                route = _tool_route(path)
                if route is not None:
                    call = self.tool_call(route[0], route[1], Headers(scope=scope), receive)
                    response = await call
                    await response(scope, receive, send)
                    return
            if (
                path == "/mcp"
                and self.mcp_route is not None
                and method in ("GET", "POST", "DELETE")
            ):
                await self.mcp_route(scope, receive, send)
                return
        await super().__call__(scope, receive, send)


async def _read_body(headers: Headers, receive: Any) -> Any:
    """``_body`` straight from the ASGI channel: the hot routes have no ``Request``."""
    content_type = headers.get("content-type", "")
    if not _is_json(content_type):
        raise UnsupportedMediaType(
            "the body must be JSON, sent as Content-Type: application/json, not"
            f" {content_type[:80]!r}"
        )
    declared = headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
        raise _TooLarge()
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _Gone()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise _TooLarge()
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    raw = b"".join(chunks)
    if not raw:
        raise InvalidArgument("a JSON body is required")
    return parse_input(raw, "request body")


class _Gone(Exception):
    """The client went away before its request body was complete."""


class _Batches:
    """Remember calls that arrive while a batch of them is being written wait for the next
    batch, which takes every one waiting (at most 64) to one worker thread in one hop and one
    ``Host.remember_all``, whose writes share a flush. A lone writer's call goes at once, as
    before (after a batch of several, the next waits at most 1 ms: ``_gather``, paced as the
    store's group commit is, ``oh.storage.group_commit.Pace``). Each call is answered exactly
    as ``Host.call_tool`` would answer it."""

    def __init__(self, run: Callable[[list[Any]], list[dict[str, Any]]]) -> None:
        self._run = run
        self._waiting: list[tuple[Any, asyncio.Future[dict[str, Any]]]] = []
        self._drain: asyncio.Task[None] | None = None
        self._pace = Pace()  # as the store's group commit paces its flushes
        self._enough: asyncio.Event | None = None  # set once as many wait as the last batch held

    async def submit(self, call: Any) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        answer: asyncio.Future[dict[str, Any]] = loop.create_future()
        self._waiting.append((call, answer))
        if self._enough is not None and not self._pace.worth_waiting(len(self._waiting)):
            self._enough.set()
        if self._drain is None:
            self._drain = loop.create_task(self._write())
        return await answer

    async def _gather(self) -> None:
        """After a batch of several, the clients it answered are sending their next calls:
        wait (at most half that batch's time, never beyond 1 ms) until as many wait, rather
        than write the first alone and the rest one flush later."""
        if not self._pace.worth_waiting(len(self._waiting)):
            return
        self._enough = asyncio.Event()
        try:
            await asyncio.wait_for(self._enough.wait(), self._pace.company())
        except TimeoutError:
            pass
        finally:
            self._enough = None

    async def _write(self) -> None:
        try:
            while self._waiting:
                await self._gather()
                started = time.perf_counter()
                batch = self._waiting[: self._pace.limit]
                del self._waiting[: self._pace.limit]
                try:
                    bodies = await asyncio.to_thread(self._run, [call for call, _ in batch])
                except BaseException as exc:
                    for _, answer in batch:
                        if not answer.done():
                            answer.set_exception(exc)
                    if not isinstance(exc, Exception):
                        raise
                    continue
                self._pace.record(len(batch), time.perf_counter() - started)
                for (_, answer), body in zip(batch, bodies, strict=True):
                    if not answer.done():  # its client may have gone
                        answer.set_result(body)
        finally:
            self._drain = None


def create_app(
    host: Host,
    *,
    mcp: tuple[Any, Any] | None = None,
    reads_inline: bool = False,
    batch_writes: bool = False,
    purge: tuple[float, Path] | None = None,
) -> FastAPI:
    """The reference host's ASGI app. ``mcp`` is ``(asgi_app, lifespan)`` to mount at /mcp.

    ``purge`` is ``(every, status file)`` of the purge worker that runs beside this server
    (``oh.cli.purge_worker``): ``/healthz`` shows its last pass.

    ``reads_inline`` runs the tools declared ``inline`` (``read``, ``explain``) on the event loop
    instead of
    a worker thread: on an embedded database they take tens of microseconds, and the hop to a
    thread and back costs about ten times that. Off for a database across the network, whose
    round trips must not hold up the loop; ``remember`` and ``recall`` always run in a thread.
    ``batch_writes`` hands the remember calls that wait together to one thread at once
    (``_Batches``): for the embedded database, whose store writes them in one flush; a
    database across the network gains more from calls in parallel on their own connections.
    """
    inline = inline_tools() if reads_inline else frozenset()
    writes = _Batches(host.remember_all) if batch_writes else None

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if mcp is None:
            yield
        else:
            async with mcp[1]():
                yield

    app = _HostApp(
        title="Oh reference host",
        version=__version__,
        description=(
            "Working memory for AI agents, kept apart from reviewed knowledge. Tool contract"
            f' version {TOOL_CONTRACT_VERSION}. Errors are {{"error": {{"code", "message"}}}};'
            f" each code has one HTTP status ({_status_table()}; 500 only for damaged stored"
            " data). Owner routes take an owner token, the tools an agent token, both as"
            " Authorization: Bearer. Every route, with examples, is on the host's own"
            " [reference page](/docs), which needs no network."
        ),
        lifespan=lifespan,
        # FastAPI's Swagger UI and ReDoc load their scripts from a CDN, so they are blank on a
        # host without the network, and they send the owner's browser elsewhere: /docs is a
        # plain page rendered here from this same document instead.
        docs_url=None,
        redoc_url=None,
        # No redirect, ever: a client that resolves a name such as ".." against the route
        # (DELETE .../records/.. is DELETE .../notebooks/{id}/) and follows a 307 would send
        # the DELETE to the notebook. A trailing slash is just a route that does not exist.
        redirect_slashes=False,
    )

    async def run(call: Callable[[], Awaitable[Response]]) -> Response:
        try:
            return await call()
        except _Gone:
            return Response(status_code=400)  # nobody is there to read an answer
        except _TooLarge:
            return _error_response(
                InvalidArgument(f"request body over {MAX_BODY_BYTES} bytes", limit=MAX_BODY_BYTES)
            )
        except Exception as exc:  # this transport's catch-all (tool calls have Host's)
            error = public_error(exc)
            if isinstance(error, Bug):
                logger.exception("unexpected error")
                host.metrics.count("bug")
            return _error_response(error)

    async def blocking(fn: Callable[..., Any], *args: Any) -> Any:
        return await asyncio.to_thread(fn, *args)

    def owner_of(request: Request) -> str:
        return host.owner(bearer_token(request.headers))

    # -- documents ------------------------------------------------------------------------

    document_body = {
        "type": "object",
        "properties": {"document": {"type": "string"}, "owner": {"type": "string"}},
    }

    @app.put(
        "/v1/documents/{document}",
        tags=["documents"],
        responses={201: _json(document_body), 200: _json(document_body), **_errors(401, 403)},
    )
    async def register_document(document: str, request: Request) -> Response:
        async def go() -> Response:
            owner = await blocking(owner_of, request)
            created = await blocking(host.register_document, owner, document)
            return JSONResponse(
                {"document": document, "owner": owner}, status_code=201 if created else 200
            )

        return await run(go)

    @app.delete(
        "/v1/documents/{document}",
        tags=["documents"],
        responses={200: _json({"type": "object"}), **_errors(401, 403, 404)},
    )
    async def remove_document(document: str, request: Request) -> Response:
        async def go() -> Response:
            owner = await blocking(owner_of, request)
            forgotten = await blocking(host.remove_document, owner, document)
            return JSONResponse({"document": document, "forgotten_notebooks": forgotten})

        return await run(go)

    # -- notebooks ------------------------------------------------------------------------

    @app.post(
        "/v1/documents/{document}/notebooks",
        tags=["notebooks"],
        openapi_extra=_body_doc(BODIES["open"]),
        responses={
            201: _json(OPENED),
            200: _json(OPENED),
            **_errors(401, 403, 404, 410, body=True),
        },
    )
    async def open_notebook(document: str, request: Request) -> Response:
        async def go() -> Response:
            owner = await blocking(owner_of, request)
            body = await _body(request)
            if not isinstance(body, dict):
                raise InvalidArgument('the body is {"run", "pin"?, "run_kind"?}')
            validate_body("open", body)
            notebook, created = await blocking(
                host.open_notebook,
                owner,
                document,
                body.get("run"),
                body.get("pin", "latest"),
                body.get("run_kind", "chat"),
            )
            token = host.agent_token(notebook.id)
            bootstrap = await blocking(host.bootstrap, token)
            base = str(request.base_url).rstrip("/")
            return JSONResponse(
                {
                    "notebook": notebook.to_json(),
                    "agent_token": token,
                    "mcp_url": f"{base}/mcp",
                    "bootstrap": bootstrap,
                },
                status_code=201 if created else 200,
            )

        return await run(go)

    @app.get(
        "/v1/notebooks",
        tags=["notebooks"],
        responses={200: _json(LISTED), **_errors(401)},
    )
    async def list_notebooks(
        request: Request,
        document: str | None = None,
        state: str | None = None,
        limit: str | None = None,
        cursor: str | None = None,
    ) -> Response:
        async def go() -> Response:
            owner = await blocking(owner_of, request)
            if document is not None and ("/" in document or not document):
                raise InvalidArgument("document holds no / and is not empty")
            size = DEFAULT_LIST_LIMIT
            if limit is not None:
                if not (limit.isascii() and limit.isdigit() and len(limit) <= 4):
                    raise InvalidArgument(f"limit is an integer from 1 to {MAX_LIST_LIMIT}")
                size = int(limit)
            listed = await blocking(host.list_notebooks, owner, document, state, size, cursor)
            return JSONResponse(listed)

        return await run(go)

    @app.get(
        "/v1/notebooks/{notebook_id}",
        tags=["notebooks"],
        responses={200: _json(NOTEBOOK), **_errors(401, 404)},
    )
    async def get_notebook(notebook_id: str, request: Request) -> Response:
        async def go() -> Response:
            owner = await blocking(owner_of, request)
            notebook = await blocking(host.notebook, owner, notebook_id)
            return JSONResponse(notebook.to_json())

        return await run(go)

    @app.delete(
        "/v1/notebooks/{notebook_id}",
        tags=["notebooks"],
        responses={200: _json({"type": "object"}), **_errors(401, 404, 410)},
    )
    async def forget_notebook(notebook_id: str, request: Request) -> Response:
        async def go() -> Response:
            owner = await blocking(owner_of, request)
            return JSONResponse(await blocking(host.forget, owner, notebook_id))

        return await run(go)

    records_body = {
        "type": "object",
        "properties": {
            "notes": {"type": "array", "items": RESULTS["read"]},
            "reviewed": {"type": "array", "items": RESULTS["read"]},
        },
        "required": ["notes", "reviewed"],
    }

    @app.delete(
        "/v1/notebooks/{notebook_id}/records/{name}",
        tags=["notebooks"],
        responses={200: _json(FORGOT_NOTE), **_errors(401, 404, 410)},
    )
    async def forget_note(notebook_id: str, name: str, request: Request) -> Response:
        async def go() -> Response:
            owner = await blocking(owner_of, request)
            return JSONResponse(await blocking(host.forget_note, owner, notebook_id, name))

        return await run(go)

    @app.get(
        "/v1/notebooks/{notebook_id}/records",
        tags=["notebooks"],
        responses={200: _json(records_body), **_errors(401, 404, 500)},
    )
    async def notebook_records(notebook_id: str, request: Request) -> Response:
        async def go() -> Response:
            owner = await blocking(owner_of, request)
            return JSONResponse(await blocking(host.records, owner, notebook_id))

        return await run(go)

    @app.get(
        "/v1/notebooks/{notebook_id}/events",
        tags=["notebooks"],
        responses={200: {"content": {"text/event-stream": {}}}, **_errors(401, 404)},
    )
    async def notebook_events(notebook_id: str, request: Request) -> Response:
        """Memory cards as server-sent events (``event: memory-card``)."""

        async def go() -> Response:
            owner = await blocking(owner_from_request, host, request)
            await blocking(host.notebook, owner, notebook_id)
            loop = asyncio.get_running_loop()
            queue: asyncio.Queue[MemoryCard] = asyncio.Queue()

            def listener(card: MemoryCard) -> None:
                if card.notebook == notebook_id:
                    loop.call_soon_threadsafe(queue.put_nowait, card)

            unsubscribe = host.subscribe(listener)

            async def stream() -> AsyncIterator[bytes]:
                try:
                    yield b": memory cards for " + notebook_id.encode() + b"\n\n"
                    while not await request.is_disconnected():
                        try:
                            card = await asyncio.wait_for(queue.get(), timeout=15)
                        except TimeoutError:
                            yield b": keep-alive\n\n"
                            continue
                        data = json.dumps(card.to_json())
                        yield f"event: memory-card\ndata: {data}\n\n".encode()
                finally:
                    unsubscribe()

            return StreamingResponse(stream(), media_type="text/event-stream")

        return await run(go)

    # -- the agent's tools ----------------------------------------------------------------

    @app.get(
        "/v1/notebooks/{notebook_id}/bootstrap",
        tags=["tools"],
        responses={200: _json(RESULTS["bootstrap"]), **_errors(401, 403, 404, 410)},
    )
    async def bootstrap(notebook_id: str, request: Request) -> Response:
        async def go() -> Response:
            body = await blocking(host.bootstrap, bearer_token(request.headers), notebook_id)
            return _result(body)

        return await run(go)

    async def tool_call(notebook_id: str, tool: str, headers: Headers, receive: Any) -> Response:
        async def go() -> Response:
            arguments = await _read_body(headers, receive)
            token = bearer_token(headers)
            if tool in inline:
                body = host.call_tool(token, tool, arguments, notebook_id)
            elif tool == "remember" and writes is not None:
                body = await writes.submit((token, arguments, notebook_id))
            else:
                body = await blocking(host.call_tool, token, tool, arguments, notebook_id)
            return _result(body)

        return await run(go)

    app.tool_call = tool_call

    for tool in TOOLS:

        def make(tool: str) -> Callable[[str, Request], Awaitable[Response]]:
            async def call(notebook_id: str, request: Request) -> Response:
                # Reached only under a root_path: ``_HostApp`` answers the rest directly.
                return await tool_call(notebook_id, tool, request.headers, request.receive)

            call.__name__ = f"tool_{tool}"
            call.__doc__ = f"The {tool} tool (see docs/tools.md). 200 also for a refusal."
            return call

        app.post(
            f"/v1/notebooks/{{notebook_id}}/tools/{tool}",
            tags=["tools"],
            openapi_extra=_body_doc(TOOLS[tool].arguments),
            responses={
                200: _json(TOOLS[tool].result),
                **_errors(401, 403, 404, 409, 410, 500, body=True),
            },
        )(make(tool))

    # -- knowledge and review -------------------------------------------------------------

    knowledge_body = {
        "type": "object",
        "properties": {
            "revision": {"type": "integer"},
            "latest": {"type": "integer"},
            "records": {"type": "array", "items": RESULTS["read"]},
        },
        "required": ["revision", "latest", "records"],
    }

    @app.get(
        "/v1/knowledge",
        tags=["knowledge"],
        responses={200: _json(knowledge_body), **_errors(401, 404)},
    )
    async def knowledge(request: Request, revision: str | None = None) -> Response:
        async def go() -> Response:
            owner = await blocking(owner_of, request)
            number: int | None = None
            if revision is not None:
                if not (revision.isascii() and revision.isdigit() and len(revision) <= 16):
                    raise InvalidArgument("revision must be a non-negative integer")
                number = int(revision)
                if number > MAX_SAFE_INTEGER:
                    raise InvalidArgument("revision must be a non-negative integer")
            return JSONResponse(await blocking(host.knowledge_at, owner, number))

        return await run(go)

    @app.post(
        "/v1/knowledge/proposals",
        tags=["knowledge"],
        openapi_extra=_body_doc(BODIES["proposal"]),
        responses={
            201: {"description": "a new pending proposal", **_json(PROPOSED_BODY)},
            200: {
                "description": "the same proposal was pending already; nothing new was stored",
                **_json(PROPOSED_BODY),
            },
            **_errors(401, 403, 404, 409, 500, body=True),
        },
    )
    async def propose(request: Request) -> Response:
        async def go() -> Response:
            owner = await blocking(owner_of, request)
            body = await _body(request)
            validate_body("proposal", body)
            made = await blocking(host.propose, owner, body)
            return JSONResponse(made, status_code=201 if made["created"] else 200)

        return await run(go)

    @app.post(
        "/v1/knowledge/proposals/{proposal_id}/decision",
        tags=["knowledge"],
        openapi_extra=_body_doc(BODIES["decision"]),
        responses={
            200: _json(
                {
                    "type": "object",
                    "properties": {
                        "proposal_id": {"type": "string"},
                        "state": {"type": "string"},
                        "revision": {"type": "integer"},
                    },
                    "required": ["proposal_id", "state"],
                }
            ),
            **_errors(401, 404, 409, 500, body=True),
        },
    )
    async def decide(proposal_id: str, request: Request) -> Response:
        async def go() -> Response:
            owner = await blocking(owner_of, request)
            body = await _body(request)
            validate_body("decision", body)
            return JSONResponse(await blocking(host.decide, owner, proposal_id, body))

        return await run(go)

    # -- operations -----------------------------------------------------------------------

    @app.get("/healthz", tags=["operations"], responses={200: _json({"type": "object"})})
    async def healthz() -> Response:
        body: dict[str, Any] = {"status": "ok", "version": __version__}
        if purge is not None:
            every, status_file = purge
            body["purge"] = {"every": every, "last_pass": read_purge_status(status_file)}
        return JSONResponse(body)

    @app.get(
        "/metrics",
        tags=["operations"],
        response_class=PlainTextResponse,
        responses={200: {"content": {"text/plain": {}}}},
    )
    async def metrics() -> Response:
        return PlainTextResponse(host.metrics.render(), media_type="text/plain; version=0.0.4")

    @app.get("/docs", include_in_schema=False)
    async def reference(request: Request) -> Response:
        base = str(request.scope.get("root_path", "")).rstrip("/")
        return HTMLResponse(reference_page(app.openapi(), base))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if exc.status_code == 404:
            mistyped = _tool_path(request.url.path)
            if mistyped is not None:
                listed = ", ".join(TOOLS)
                message = f"no tool {mistyped[1]!r}; the tools are {listed}"
                return _error_response(NotFound(message))
            return _error_response(NotFound("no such route (the routes are listed at /docs)"))
        if exc.status_code == 405:
            allow = _allowed(request.app, request.scope)
            response = _error_response(
                MethodNotAllowed(f"this route answers {allow or 'other methods'}", allow=allow)
            )
            if allow:
                response.headers["Allow"] = allow
            return response
        return _error_response(InvalidArgument(f"{exc.detail}"))

    @app.exception_handler(RequestValidationError)
    async def validation_error(_request: Request, exc: RequestValidationError) -> Response:
        return _error_response(InvalidArgument("the request does not fit this route"))

    app.include_router(panel_router(host))
    app.add_middleware(PanelCompression)

    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = publish(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

    if mcp is not None:
        # A route, not a mount: POST /mcp is answered directly, not redirected to /mcp/.
        app.mcp_route = _limited(mcp[0])
        app.add_route("/mcp", app.mcp_route, methods=["GET", "POST", "DELETE"])
    return app
