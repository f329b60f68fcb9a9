"""Malformed input (SPEC §5: "no input, however malformed, produces a crash or a 500"):
generated inputs to every tool and every route; every rejection is typed.

* **Tools, in process**: hypothesis-generated arguments for every tool and the bootstrap: any
  JSON-like shape, wrong types, huge and negative integers, NaN and infinities, lone
  surrogates, long strings, deep nesting. Each answer is a result or a typed error body, and
  a call that was not applied changes nothing.
* **HTTP, raw**: hypothesis-generated bodies sent to every route of a real ``oh serve``
  (random bytes, invalid UTF-8, JSON with duplicate keys, NaN, ``1e999``, huge integers,
  escaped lone surrogates, nesting 100,000 deep, bodies of several MiB, other content types)
  and random path parameters. No 5xx; every 4xx is ``{"error": {"code", "message"}}`` with the
  status the code table gives it.
* (schemathesis against ``/openapi.json`` has its own suite: ``published_schemas.py``.)
* **MCP, raw**: generated JSON-RPC messages and ``tools/call`` arguments posted to ``/mcp``:
  no 5xx, and a tool's error is a result with ``isError`` and a typed code.
* **Size limit**: a body declared or streamed over 1 MiB is refused before it is read: the
  request's headers promise 2 MB, or chunks pass 1 MiB, and the answer must come while the
  client is still holding back the rest of the body.

The server's log is searched for unexpected failures caught by the catch-all (``unexpected
error``, ``failed unexpectedly``), which answer ``storage_unavailable``.

    python stress/malformed_input.py --examples 20000

Prints ``500s: 0`` and exits 1 on any 5xx, untyped rejection, or body read past the limit.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import Server, common_arguments, report, scratch, seed_of
from oh.errors import HTTP_STATUS
from oh.services.notebooks import Notebooks
from oh.storage.sqlite.notebooks import SqliteMemoryStore
from oh.testing.lifecycle import FakeClock
from oh.testing.tools import ARGUMENT_NAMES, SECRET
from oh.tools import Caller, Tools

LIMIT = 1_048_576
TOOLS = ["remember", "query", "read", "explain", "recall", "bootstrap"]
SETTINGS = {
    "deadline": None,
    "database": None,
    "suppress_health_check": list(HealthCheck),
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=2**53, max_value=2**200),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=50),
    st.text(max_size=5000),
    st.sampled_from(["\ud800", "a\udfffb", "\x00", "note:a", "current_notes", "lead:x" * 40]),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=5),
        st.dictionaries(st.one_of(st.text(max_size=10), st.sampled_from(ARGUMENT_NAMES)), inner),
    ),
    max_leaves=20,
)
shaped = st.fixed_dictionaries(
    {}, optional=dict.fromkeys([*ARGUMENT_NAMES, "op", "record"], values)
)


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = [value]
    return value


# -- tools, in process ----------------------------------------------------------------------------


def tools_in_process(directory: Path, examples: int) -> dict[str, Any]:
    clock = FakeClock()
    memory = SqliteMemoryStore(directory / "fuzz-memory.db", synchronous="NORMAL")
    tools = Tools(memory, None, SECRET, clock=clock)
    notebook = Notebooks(memory, clock=clock).open("ann", "doc", "fuzz")
    caller = Caller(notebook.id, f"agent:{notebook.id}", "agent:fuzz")
    tools.call(
        caller,
        "remember",
        {
            "based_on": 0,
            "request_id": "seed",
            "changes": [{"op": "add", "record": {"name": "note:a", "text": "a"}}],
        },
    )
    counts = {"calls": 0, "results": 0, "typed_errors": 0, "untyped": 0, "changed_state": 0}
    problems: list[str] = []

    def state() -> tuple[int, list[tuple[str, str]]]:
        return memory.digests(notebook.id)

    @settings(max_examples=examples, **SETTINGS)  # type: ignore[arg-type]
    @given(
        st.sampled_from(TOOLS),
        st.one_of(values, shaped, st.just(_deep(50_000)), st.just({"changes": _deep(10_000)})),
    )
    def check(tool: str, arguments: Any) -> None:
        before = state()
        try:
            result = tools.call(caller, tool, arguments)
        except Exception as exc:  # a crash: the one thing that must never happen
            counts["untyped"] += 1
            problems.append(f"{tool}: {type(exc).__name__}: {exc}"[:200])
            return
        counts["calls"] += 1
        if "error" in result:
            code = result["error"].get("code")
            if code in HTTP_STATUS and code != "storage_unavailable":
                counts["typed_errors"] += 1
            else:
                counts["untyped"] += 1
                problems.append(f"{tool}: {result}"[:200])
        else:
            counts["results"] += 1
        if result.get("status") != "applied" and state() != before:
            counts["changed_state"] += 1
            problems.append(f"{tool} changed the notebook without applying: {arguments!r}"[:200])

    check()
    memory.close()
    return {**counts, "problems": problems[:10]}


# -- HTTP, raw ------------------------------------------------------------------------------------


def _json_text(value: Any) -> str:
    return json.dumps(value, allow_nan=True, default=str)


@st.composite
def bodies(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 11))
    if kind == 0:
        return draw(st.binary(max_size=300))
    if kind == 1:
        return b"\xff\xfe" + draw(st.binary(max_size=50))
    if kind == 2:
        key = draw(st.sampled_from(ARGUMENT_NAMES))
        return f'{{"{key}": 1, "{key}": 2}}'.encode()
    if kind == 3:
        token = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999", "1" * 400]))
        return f'{{"based_on": {token}, "question": {token}, "row": {token}}}'.encode()
    if kind == 4:
        return b'{"name": "note:\\ud800", "text": "\\udfff", "question": "\\ud83d"}'
    if kind == 5:
        depth = draw(st.sampled_from([33, 1000, 100_000]))
        return b"[" * depth + b"]" * depth
    if kind == 6:
        size = draw(st.sampled_from([LIMIT - 100, LIMIT + 1, 3 * LIMIT]))
        return b'{"text": "' + b"x" * size + b'"}'
    if kind == 7:
        return _json_text(draw(values)).encode()
    if kind == 8:
        return _json_text(draw(shaped)).encode()
    if kind == 9:
        return b"\xef\xbb\xbf" + _json_text(draw(shaped)).encode()  # a byte order mark
    if kind == 10:
        return _json_text(draw(shaped)).encode() + b" trailing"
    return b""


def routes(world: dict[str, Any]) -> list[tuple[str, str, str]]:
    """``(method, path, credential)`` for every route that reads a body or a parameter."""
    nb, proposal = world["notebook"], world["proposal"]
    tools = [("POST", f"/v1/notebooks/{nb}/tools/{tool}", "agent") for tool in TOOLS[:5]]
    return [
        *tools,
        ("GET", f"/v1/notebooks/{nb}/bootstrap", "agent"),
        ("POST", "/v1/documents/fuzz-doc/notebooks", "owner"),
        ("PUT", "/v1/documents/fuzz-doc-2", "owner"),
        ("GET", f"/v1/notebooks/{nb}", "owner"),
        ("GET", f"/v1/notebooks/{nb}/records", "owner"),
        ("GET", "/v1/knowledge", "owner"),
        ("POST", "/v1/knowledge/proposals", "owner"),
        ("POST", f"/v1/knowledge/proposals/{proposal}/decision", "owner"),
    ]


@st.composite
def path_parameters(draw: st.DrawFn) -> str:
    return draw(
        st.one_of(
            st.text(max_size=30),
            st.sampled_from(["nb_", "nb_" + "0" * 32, "%00", "..", "a" * 10_000, "\u202e", "%ff"]),
        )
    )


class Tally:
    def __init__(self) -> None:
        self.requests = 0
        self.statuses: dict[int, int] = {}
        self.server_errors: list[str] = []
        self.untyped: list[str] = []

    def answer(self, where: str, status: int, text: str, *, json_errors: bool = True) -> None:
        self.requests += 1
        self.statuses[status] = self.statuses.get(status, 0) + 1
        if status >= 500:
            self.server_errors.append(f"{where}: {status} {text[:150]}")
            return
        if status < 400 or not json_errors:
            return
        try:
            code = json.loads(text)["error"]["code"]
            typed = isinstance(code, str) and HTTP_STATUS.get(code) == status
        except (ValueError, KeyError, TypeError):
            typed = False
        if not typed:
            self.untyped.append(f"{where}: {status} {text[:150]}")


def http_raw(server: Server, world: dict[str, Any], examples: int, tally: Tally) -> None:
    credentials = {"owner": world["owner"], "agent": world["agent"]}
    every = routes(world)
    client = httpx.Client(base_url=server.url, timeout=60)

    @settings(max_examples=examples, **SETTINGS)  # type: ignore[arg-type]
    @given(
        st.sampled_from(every),
        bodies(),
        st.sampled_from(["application/json", "text/plain", "", "multipart/form-data; boundary=x"]),
        st.one_of(st.none(), path_parameters()),
        st.sampled_from(["", "?revision=x", "?revision=99999999999999999", "?revision=-1"]),
    )
    def check(route: Any, body: bytes, kind: str, parameter: str | None, query: str) -> None:
        method, path, who = route
        if parameter is not None:
            encoded = quote(parameter.encode("utf-8", "surrogatepass"), safe="")
            path = path.replace(world["notebook"], encoded)
        headers = {"Authorization": f"Bearer {credentials[who]}"}
        if kind:
            headers["Content-Type"] = kind
        try:
            answer = client.request(method, path + query, content=body, headers=headers)
        except httpx.HTTPError as exc:
            tally.requests += 1
            tally.server_errors.append(f"{method} {path}: {type(exc).__name__}")
            return
        tally.answer(f"{method} {path[:60]}", answer.status_code, answer.text)

    check()


def mcp_raw(server: Server, world: dict[str, Any], examples: int, tally: Tally) -> None:
    client = httpx.Client(timeout=60)
    headers = {
        "Authorization": f"Bearer {world['agent']}",
        "Accept": "application/json, text/event-stream",
        "Content-Type": "application/json",
    }

    @settings(max_examples=examples, **SETTINGS)  # type: ignore[arg-type]
    @given(
        st.sampled_from([*TOOLS[:5], "bootstrap", "", "nope"]),
        st.one_of(values, shaped, st.just(_deep(1000))),
        st.integers(0, 6),
    )
    def check(tool: str, arguments: Any, envelope: int) -> None:
        message: Any = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": tool, "arguments": arguments},
        }
        if envelope == 1:
            message["method"] = arguments if isinstance(arguments, str) else "tools/cal"
        elif envelope == 2:
            message = arguments
        elif envelope == 3:
            message["params"] = arguments
        elif envelope == 4:
            message["jsonrpc"] = "1.0"
        try:
            raw = json.dumps(message, allow_nan=True, default=str).encode()
        except (ValueError, RecursionError):
            raw = b"[" * 5000
        try:
            answer = client.post(f"{server.url}/mcp", content=raw, headers=headers)
        except httpx.HTTPError as exc:
            tally.requests += 1
            tally.server_errors.append(f"MCP: {type(exc).__name__}")
            return
        tally.answer("MCP", answer.status_code, answer.text, json_errors=False)
        if answer.status_code == 200 and envelope == 0:
            try:
                result = answer.json().get("result") or {}
            except ValueError:
                return
            if result.get("isError"):
                code = (result.get("structuredContent") or {}).get("error", {}).get("code")
                if code not in HTTP_STATUS or code == "storage_unavailable":
                    tally.untyped.append(f"MCP {tool}: {str(result)[:150]}")

    check()


# -- the size limit -------------------------------------------------------------------------------


def refused_before_read(port: int, path: str, token: str, *, chunked: bool) -> tuple[bool, str]:
    """Whether a body over the limit is answered while the client still holds part of it back.

    Declared: the headers promise 2,000,000 bytes and only 1,000 are sent. Chunked: chunks of
    64 KiB until just past 1 MiB, then nothing. A server that reads the body before deciding
    waits for the rest and answers nothing within the wait.
    """
    head = [
        f"POST {path} HTTP/1.1",
        f"Host: 127.0.0.1:{port}",
        f"Authorization: Bearer {token}",
        "Content-Type: application/json",
        "Accept: application/json, text/event-stream",
    ]
    head.append("Transfer-Encoding: chunked" if chunked else "Content-Length: 2000000")
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode())
        if chunked:
            chunk = b"[" * 65536
            for _ in range(LIMIT // len(chunk) + 1):
                sock.sendall(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
        else:
            sock.sendall(b"[" * 1000)
        sock.settimeout(1.5)  # an early refusal comes within milliseconds
        try:
            answer = sock.recv(65536).decode(errors="replace")
        except TimeoutError:
            return False, "no answer while the body was held back"
    status = answer.split("\r\n", 1)[0]
    return " 400 " in status or " 413 " in status, status


def size_limit(server: Server, world: dict[str, Any]) -> dict[str, Any]:
    nb = world["notebook"]
    checks = {f"/v1/notebooks/{nb}/tools/{tool}": world["agent"] for tool in TOOLS[:5]} | {
        "/v1/documents/fuzz-doc/notebooks": world["owner"],
        "/v1/knowledge/proposals": world["owner"],
        "/mcp": world["agent"],
    }
    results: dict[str, str] = {}
    refused = 0
    for path, token in checks.items():
        for chunked in (False, True):
            ok, status = refused_before_read(server.port, path, token, chunked=chunked)
            refused += ok
            label = f"{'chunked' if chunked else 'declared'} {path.replace(nb, '{id}')}"
            results[label] = status if ok else f"NOT REFUSED ({status})"
    return {"checked": 2 * len(checks), "refused_before_read": refused, "by_route": results}


# -- all together ---------------------------------------------------------------------------------


def setup(server: Server) -> dict[str, Any]:
    owner = server.owner_token("ann")
    http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {owner}"})
    http.put("/v1/documents/fuzz-doc")
    opened = http.post("/v1/documents/fuzz-doc/notebooks", json={"run": "fuzz"}).json()
    proposal = http.post(
        "/v1/knowledge/proposals",
        json={
            "record": {"name": "note:p", "text": "p"},
            "source": {"document": "d", "passage": "p", "locator": "l"},
        },
    ).json()["proposal_id"]
    return {
        "owner": owner,
        "agent": opened["agent_token"],
        "notebook": opened["notebook"]["id"],
        "proposal": proposal,
    }


def run(
    directory: Path,
    examples: int,
    seed: int,
    *,
    server: Server | None = None,
) -> dict[str, Any]:
    """Everything above, on ``server`` if given (else a new ``oh serve``)."""
    random.seed(seed)
    tools = tools_in_process(directory, examples)
    tally = Tally()
    with contextlib.ExitStack() as stack:
        if server is None:
            server = stack.enter_context(Server(directory / "data", recall="shadow"))
        logged_before = len(server.output())  # a shared server may have logged already
        world = setup(server)
        http_raw(server, world, examples, tally)
        mcp_raw(server, world, max(50, examples // 4), tally)
        limits = size_limit(server, world)
        alive = httpx.get(f"{server.url}/healthz", timeout=10).status_code == 200
        log = server.output()[logged_before:]
    caught = log.count("unexpected error") + log.count("failed unexpectedly")
    five_hundreds = len(tally.server_errors) + tools["untyped"]
    untyped = len(tally.untyped)
    ok = (
        five_hundreds == 0
        and untyped == 0
        and tools["changed_state"] == 0
        and limits["refused_before_read"] == limits["checked"]
        and caught == 0
        and alive
    )
    return {
        "suite": "malformed",
        "seed": seed,
        "tool_calls_in_process": tools,
        "http_and_mcp_requests": tally.requests,
        "statuses": dict(sorted(tally.statuses.items())),
        "server_errors": len(tally.server_errors),
        "untyped_rejections": untyped,
        "size_limit": limits,
        "caught_by_the_catch_all": caught,
        "server_alive_after": alive,
        "examples": (tally.server_errors + tally.untyped)[:10],
        "figure": (
            f"500s: {five_hundreds}; untyped: {untyped} of"
            f" {tally.requests + tools['calls']} inputs; over 1 MiB refused before reading:"
            f" {limits['refused_before_read']}/{limits['checked']}"
        ),
        "ok": ok,
    }


def main() -> int:
    parser = common_arguments(__doc__)
    parser.add_argument("--examples", type=int, default=20_000)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    seed = seed_of(args.seed)
    with scratch("oh-malformed-", args.keep) as tmp:
        summary = run(tmp, args.examples, seed)
    return report(summary, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
