"""One body, one meaning: the same raw bytes as a tool call over HTTP, over MCP and through the
library give the same result, for thousands of generated bodies.

A real ``oh serve`` (embedded backend, recall in shadow mode) and, in this process, a library
``Host`` on the same databases. Three notebooks (one per transport, same run, so the same
author) receive the same sequence of calls; each call is a random tool call, often valid, then
spelled or spoiled the way careless and hostile clients do: ``5`` written ``5.0``, ``5e0`` or
``50e-1``; integers no JSON reader keeps exactly (``9007199254740992``, ``1e300``); ``true``
for a number; a duplicated key; a control character or a lone surrogate escaped into a string;
bytes that are not UTF-8; ``NaN``; deep nesting; an unknown key. The same bytes go to the tool
route over HTTP, inside a raw JSON-RPC ``tools/call`` to ``/mcp``, and through
``parse_input`` to ``Host.call_tool``. The results must be equal but for what names the
notebook (answer ids, tokens, times); bytes that are no JSON at all make the JSON-RPC message
around them no JSON either, so there MCP answers its parse error and the others must refuse.
No 5xx anywhere.

    python stress/parity.py --calls 5000 --seed 11

Prints ``mismatches: 0 of N calls`` and exits 1 on any mismatch or server error.
"""

from __future__ import annotations

import contextlib
import json
import random
from pathlib import Path
from typing import Any

import httpx

from harness import Server, common_arguments, report, scratch, seed_of
from oh.config import Locations, RecallConfig, close_host, open_agent_host
from oh.core.canonical import parse_input
from oh.errors import OhError

TRANSPORTS = ("http", "mcp", "library")
# What names the notebook or the moment, not what the call meant.
UNCOMPARED = ("answer_id", "token", "token_expires_at", "next_cursor", "written_at", "pending")
NAMES = [f"note:n{index}" for index in range(6)]


def _valid(rng: random.Random, version: int) -> tuple[str, dict[str, Any]]:
    """A plausible call: most of them valid, with the current version half of the time."""
    tool = rng.choice(["remember", "remember", "remember", "query", "read", "explain", "recall"])
    if tool == "remember":
        changes = []
        for name in rng.sample(NAMES, rng.randint(1, 3)):
            op = rng.choice(["add", "replace", "remove"])
            if op == "remove":
                changes.append({"op": op, "name": name})
            else:
                record: dict[str, Any] = {"name": name, "text": rng.choice(["a", "é 🐠", ""])}
                if rng.random() < 0.5:
                    record["fields"] = {"n": rng.randint(-5, 5), "x": rng.choice([0.5, 1e-7])}
                if rng.random() < 0.3:
                    record["supports"] = [rng.choice([n for n in NAMES if n != name])]
                changes.append({"op": op, "record": record})
        based_on = version if rng.random() < 0.6 else rng.randint(0, version + 1)
        return tool, {
            "based_on": based_on,
            "request_id": f"r-{rng.randint(0, 40)}",
            "changes": changes,
        }
    if tool == "query":
        question = rng.choice(["current_notes", "related", "changes_since", "of_kind", "conflicts"])
        arguments: dict[str, Any] = {"question": question}
        if question == "related":
            arguments["name"] = rng.choice(NAMES)
        if question == "changes_since":
            arguments["since"] = rng.randint(0, version)
        if question == "of_kind":
            arguments["kind"] = "note"
        if rng.random() < 0.5:
            arguments["limit"] = rng.randint(1, 5)
        return tool, arguments
    if tool == "read":
        return tool, {"name": rng.choice(NAMES)}
    if tool == "explain":
        return tool, {"token": "TOKEN", "row": rng.randint(0, 3)}
    return tool, {"text": "a", "limit": rng.randint(1, 5)}


def _spoil(rng: random.Random, text: str) -> bytes:
    """``text`` (JSON) spelled or spoiled in one to three ways."""
    for _ in range(rng.choice([0, 1, 1, 2, 3])):
        kind = rng.randrange(11)
        digits = [i for i, c in enumerate(text) if c.isdigit() and not text[i - 1].isalnum()]
        quotes = [i for i, c in enumerate(text) if c == '"']
        if kind <= 2 and digits:  # an integer spelled as a float
            at = rng.choice(digits)
            end = at
            while end < len(text) and text[end].isdigit():
                end += 1
            number = text[at:end]
            spelled = rng.choice([f"{number}.0", f"{number}e0", f"{number}0e-1", f"{number}.00"])
            text = text[:at] + spelled + text[end:]
        elif kind == 3 and digits:  # an integer no reader keeps exactly, or not a number
            at = rng.choice(digits)
            unsafe = rng.choice(["9007199254740992", "1e300", "true", "-0.0", "1e400", "NaN"])
            text = text[:at] + unsafe + text[at + 1 :]
        elif kind == 4 and text.startswith("{"):  # a duplicated key
            key = rng.choice(["based_on", "name", "question", "limit", "row", "text", "op"])
            text = '{"' + key + '": 1, ' + text[1:] if len(text) > 2 else text
        elif kind in (5, 6) and quotes:  # a control character or a lone surrogate in a string
            at = rng.choice(quotes) + 1
            escape = rng.choice(["\\u0000", "\\u0007", "\\u001f", "\\u007f", "\\u0085"])
            escape = "\\ud800" if kind == 6 else escape
            text = text[:at] + escape + text[at:]
        elif kind == 7 and text.startswith("{"):  # an unknown key
            text = '{"author": "me", ' + text[1:]
        elif kind == 8 and text.startswith("{"):  # deep nesting
            depth = rng.choice([20, 40, 200])
            text = '{"fields": ' + "[" * depth + "1" + "]" * depth + ", " + text[1:]
        elif kind == 9:  # bytes that are not UTF-8
            return text.encode() + b"\xff"
        elif kind == 10 and quotes:  # a string where a number goes, or the other way round
            text = text.replace(": 0", ': "0"', 1)
    return text.encode("utf-8")


class _Transports:
    def __init__(self, server: Server, owner: str) -> None:
        self.server = server
        self.http = httpx.Client(base_url=server.url, timeout=60)
        self.notebooks: dict[str, tuple[str, str]] = {}
        for transport in TRANSPORTS:
            document = f"parity-{transport}"
            auth = {"Authorization": f"Bearer {owner}"}
            self.http.put(f"/v1/documents/{document}", headers=auth).raise_for_status()
            opened = self.http.post(
                f"/v1/documents/{document}/notebooks", json={"run": "parity"}, headers=auth
            ).json()
            self.notebooks[transport] = (opened["notebook"]["id"], opened["agent_token"])
        # The library's host is configured as the server is (recall in shadow mode).
        locations = Locations.resolve(str(server.data))
        self.host = open_agent_host(locations, RecallConfig.resolve(locations, "shadow", None))
        self.tokens = dict.fromkeys(TRANSPORTS, "")

    def close(self) -> None:
        self.http.close()
        close_host(self.host)

    def call(self, transport: str, tool: str, raw: bytes) -> tuple[int, dict[str, Any]]:
        notebook, token = self.notebooks[transport]
        raw = raw.replace(b"TOKEN", self.tokens[transport].encode())
        if transport == "http":
            answer = self.http.post(
                f"/v1/notebooks/{notebook}/tools/{tool}",
                content=raw,
                headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
            )
            body: dict[str, Any] = answer.json()
            status = answer.status_code
        elif transport == "mcp":
            envelope = (
                b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"'
                + tool.encode()
                + b'","arguments":'
                + raw
                + b"}}"
            )
            answer = self.http.post(
                "/mcp",
                content=envelope,
                headers={
                    "Authorization": f"Bearer {token}",
                    "Accept": "application/json, text/event-stream",
                    "Content-Type": "application/json",
                },
            )
            status = answer.status_code
            message = answer.json()
            body = message["result"]["structuredContent"] if "result" in message else message
        else:
            status = 200
            try:
                body = self.host.call_tool(token, tool, parse_input(raw))
            except OhError as exc:
                body = exc.to_json()
        if tool == "query" and "token" in body:
            self.tokens[transport] = body["token"]
        return status, body


PARSE_ERROR = {"error": -32700}  # JSON-RPC: the message itself is not JSON


def _comparable(body: dict[str, Any]) -> Any:
    if "error" in body:
        return {"error": body["error"].get("code")}
    return {key: value for key, value in body.items() if key not in UNCOMPARED}


def _same(http: Any, mcp: Any, library: Any) -> bool:
    """Equal results; except that bytes which are not JSON at all, embedded in a JSON-RPC
    message, make that message no JSON either: MCP then answers its parse error, and HTTP and
    the library must refuse the same bytes too."""
    if mcp == PARSE_ERROR:
        return http == library == {"error": "invalid_argument"}
    return bool(http == mcp == library)


def run(directory: Path, calls: int, seed: int, *, server: Server | None = None) -> dict[str, Any]:
    rng = random.Random(seed)
    mismatches: list[str] = []
    server_errors = 0
    codes: dict[str, int] = {}
    version = 0
    with contextlib.ExitStack() as stack:
        if server is None:
            server = stack.enter_context(Server(directory / "data", recall="shadow"))
        transports = _Transports(server, server.owner_token("parity"))
        stack.callback(transports.close)
        for _ in range(calls):
            tool, arguments = _valid(rng, version)
            raw = _spoil(rng, json.dumps(arguments, ensure_ascii=False))
            answers = {t: transports.call(t, tool, raw) for t in TRANSPORTS}
            server_errors += sum(status >= 500 for status, _ in answers.values())
            seen = [_comparable(body) for _, body in answers.values()]
            if not _same(*seen):
                if len(mismatches) < 10:
                    mismatches.append(f"{tool} {raw[:200]!r}: {seen}")
                else:
                    mismatches.append("")
            first = answers["http"][1]
            code = first.get("error", {}).get("code") or first.get("status") or "ok"
            codes[code] = codes.get(code, 0) + 1
            if first.get("status") == "applied":
                version = first["version"]
    return {
        "suite": "parity",
        "seed": seed,
        "calls": calls,
        "answers": dict(sorted(codes.items())),
        "server_errors": server_errors,
        "mismatches": len(mismatches),
        "examples": [m for m in mismatches if m],
        "figure": f"mismatches: {len(mismatches)} of {calls} calls x 3 transports;"
        f" 5xx: {server_errors}",
        "ok": not mismatches and server_errors == 0,
    }


def main() -> int:
    parser = common_arguments(__doc__)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    seed = seed_of(args.seed)
    with scratch("oh-parity-", args.keep) as tmp:
        summary = run(tmp, args.calls, seed)
    return report(summary, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
