"""The authorization matrix (SPEC §6, §11): every owner route, every agent tool route, every
Memory panel route and every MCP request of a real ``oh serve``, each tried with every wrong
credential against one owner's notebook (ann's).

Wrong credentials: none, an empty or non-Bearer scheme, another owner's token, made-up and
altered owner tokens, the owner's token where an agent's belongs and an agent's where the
owner's belongs, agent tokens of another notebook (the same owner's and another owner's), of a
forgotten notebook and of a removed document's notebook, forged agent tokens (zeros, another
notebook's MAC, another host's secret), a non-ASCII token and a 10 KB one; on the panel: no
session, a forged session cookie, and another owner's signed-in session (with its own CSRF
token). Over MCP (streamable HTTP at ``/mcp``) the bearer token chooses the notebook, so there
every request (initialize, tools/list, each tool, the bootstrap resource) is made with each
credential.

Cross-owner access is any answer to a wrong credential that succeeded on ann's notebook,
document, proposal or knowledge, or that carries anything of hers (a note's text, a name no
request mentioned, her agent token); afterwards her notebook, document, proposal and knowledge
must be exactly as before. Separately counted: refusals with a code outside the denial codes
(``unauthenticated``, ``forbidden``, ``not_found``, or a redirect to sign in on the panel).

    python stress/authz_matrix.py

Prints ``cross-owner access: 0`` and exits 1 on any crossing or improper refusal.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
from pathlib import Path
from typing import Any

import httpx

from harness import Server, common_arguments, report, scratch, seed_of
from oh.panel.sessions import SESSION_COOKIE

SOURCE = {"document": "hughes-2018.pdf", "passage": "Recovery took ten years.", "locator": "p. 4"}
DENIALS = {"unauthenticated", "forbidden", "not_found"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


class Owner:
    def __init__(self, server: Server, name: str) -> None:
        self.token = server.owner_token(name)
        self.http = httpx.Client(
            base_url=server.url, headers={"Authorization": f"Bearer {self.token}"}, timeout=30
        )

    def open(self, document: str, run: str) -> dict[str, Any]:
        self.http.put(f"/v1/documents/{document}")
        answer = self.http.post(f"/v1/documents/{document}/notebooks", json={"run": run})
        answer.raise_for_status()
        return dict(answer.json())


def _agent(server: Server, token: str, notebook_id: str, tool: str, body: Any) -> Any:
    answer = httpx.post(
        f"{server.url}/v1/notebooks/{notebook_id}/tools/{tool}",
        json=body,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
    )
    return answer.json()


def setup(server: Server) -> dict[str, Any]:
    """Ann's secrets, bob, and every kind of wrong credential."""
    ann, bob = Owner(server, "ann"), Owner(server, "bob")
    mark = secrets.token_hex(6)
    secret_text, hidden_name = f"SECRET-ANN-{mark}", f"note:hidden-{mark}"
    opened = ann.open("ann-doc", "run-1")
    notebook_id, agent = opened["notebook"]["id"], opened["agent_token"]
    notes = [
        {"op": "add", "record": {"name": "note:secret", "text": secret_text}},
        {"op": "add", "record": {"name": hidden_name, "text": secret_text}},
    ]
    _agent(
        server, agent, notebook_id, "remember", {"based_on": 0, "request_id": "s", "changes": notes}
    )
    knowledge_text = f"REVIEWED-BY-ANN-{mark}"
    reviewed = ann.http.post(
        "/v1/knowledge/proposals",
        json={"record": {"name": "note:reviewed", "text": knowledge_text}, "source": SOURCE},
    ).json()["proposal_id"]
    ann.http.post(
        f"/v1/knowledge/proposals/{reviewed}/decision", json={"decision": "accept", "reason": "ok"}
    ).raise_for_status()
    pending = ann.http.post(
        "/v1/knowledge/proposals",
        json={"notebook": notebook_id, "name": hidden_name, "source": SOURCE},
    ).json()["proposal_id"]
    explain = _agent(server, agent, notebook_id, "query", {"question": "current_notes"})["token"]
    other = ann.open("ann-doc", "run-2")
    forgotten = ann.open("ann-doc", "run-forgotten")
    ann.http.delete(f"/v1/notebooks/{forgotten['notebook']['id']}").raise_for_status()
    removed = ann.open("ann-removed-doc", "run-1")
    ann.http.delete("/v1/documents/ann-removed-doc").raise_for_status()
    bobs = bob.open("bob-doc", "run-1")
    prefix = f"oha_{notebook_id}."
    mac = agent[len(prefix) :]
    other_host = hmac.new(b"x" * 32, b"agent:" + notebook_id.encode(), hashlib.sha256).hexdigest()
    flipped = ann.token[:-1] + ("A" if ann.token[-1] != "A" else "B")
    basic = base64.b64encode(f"ann:{ann.token}".encode()).decode()
    owner_wrong = {
        "no credential": None,
        "empty bearer": "Bearer",
        "basic scheme": f"Basic {basic}",
        "another owner": f"Bearer {bob.token}",
        "made-up owner token": f"Bearer oho_{secrets.token_urlsafe(32)}",
        "owner token altered": f"Bearer {flipped}",
        "owner token cut short": f"Bearer {ann.token[:-3]}",
        "her own agent token": f"Bearer {agent}",
        "another owner's agent": f"Bearer {bobs['agent_token']}",
        "non-ASCII token": f"Bearer {ann.token[:-1]}\u00e9",
        "10 KB token": f"Bearer oho_{'a' * 10_000}",
    }
    agent_wrong = {
        **{k: v for k, v in owner_wrong.items() if k != "her own agent token"},
        "her owner token": f"Bearer {ann.token}",
        "her other notebook's agent": f"Bearer {other['agent_token']}",
        "agent of a forgotten notebook": f"Bearer {forgotten['agent_token']}",
        "agent of a removed document": f"Bearer {removed['agent_token']}",
        "forged agent (zeros)": f"Bearer {prefix}{'0' * 64}",
        "forged agent (another notebook's MAC)": f"Bearer {prefix}"
        + other["agent_token"].split(".")[1],
        "forged agent (another host)": f"Bearer {prefix}{other_host}",
        "forged agent (MAC altered)": f"Bearer {prefix}{mac[:-1]}{'0' if mac[-1] != '0' else '1'}",
        "non-ASCII agent token": f"Bearer {prefix}{mac[:-1]}\u00e9",
    }
    return {
        "ann": ann,
        "bob": bob,
        "notebook": notebook_id,
        "agent": agent,
        "explain": explain,
        "pending": pending,
        "secrets": [secret_text, hidden_name, agent],
        "knowledge": knowledge_text,
        "owner_wrong": owner_wrong,
        "agent_wrong": agent_wrong,
    }


def owner_routes(world: dict[str, Any]) -> list[tuple[str, str, Any, bool]]:
    """``(method, path, body, scoped)``: ``scoped`` routes answer any owner about their own
    things (a 2xx is fine as long as nothing of ann's is in it)."""
    nb, pending = world["notebook"], world["pending"]
    return [
        ("PUT", "/v1/documents/ann-doc", None, False),
        ("DELETE", "/v1/documents/ann-doc", None, False),
        ("POST", "/v1/documents/ann-doc/notebooks", {"run": "run-1"}, False),
        ("POST", "/v1/documents/ann-doc/notebooks", {"run": "run-new"}, False),
        ("GET", f"/v1/notebooks/{nb}", None, False),
        ("DELETE", f"/v1/notebooks/{nb}", None, False),
        ("GET", f"/v1/notebooks/{nb}/records", None, False),
        ("GET", f"/v1/notebooks/{nb}/events", None, False),
        ("GET", "/v1/knowledge", None, True),
        ("GET", "/v1/knowledge?revision=1", None, True),
        (
            "POST",
            "/v1/knowledge/proposals",
            {"notebook": nb, "name": "note:secret", "source": SOURCE},
            False,
        ),
        (
            "POST",
            f"/v1/knowledge/proposals/{pending}/decision",
            {"decision": "accept", "reason": "mine now"},
            False,
        ),
    ]


def agent_routes(world: dict[str, Any]) -> list[tuple[str, str, Any, bool]]:
    nb = world["notebook"]
    tools = f"/v1/notebooks/{nb}/tools"
    write = {"op": "add", "record": {"name": "note:intruder", "text": "x"}}
    return [
        ("GET", f"/v1/notebooks/{nb}/bootstrap", None, False),
        (
            "POST",
            f"{tools}/remember",
            {"based_on": 1, "request_id": "x", "changes": [write]},
            False,
        ),
        (
            "POST",
            f"{tools}/remember",
            {"based_on": 1, "request_id": "s", "changes": [write]},
            False,
        ),
        ("POST", f"{tools}/query", {"question": "current_notes"}, False),
        ("POST", f"{tools}/read", {"name": "note:secret"}, False),
        ("POST", f"{tools}/explain", {"token": world["explain"], "row": 0}, False),
        ("POST", f"{tools}/recall", {"text": "secret"}, False),
    ]


class Tally:
    def __init__(self, world: dict[str, Any]) -> None:
        self.secrets = world["secrets"]  # the notebook's: only its agent and ann may see them
        self.knowledge = world["knowledge"]  # ann's reviewed knowledge: her notebooks see it
        self.requests = 0
        self.crossed: list[str] = []
        self.improper: list[str] = []

    def leaks(self, text: str, *, knowledge_allowed: bool = False) -> bool:
        if not knowledge_allowed and self.knowledge in text:
            return True
        return any(secret in text for secret in self.secrets)

    def http(self, label: str, route: str, answer: httpx.Response, scoped: bool) -> None:
        self.requests += 1
        where = f"{label} → {route}: {answer.status_code}"
        if self.leaks(answer.text) or (answer.is_success and not scoped):
            self.crossed.append(f"{where} {answer.text[:200]}")
            return
        if answer.is_success:
            return
        try:
            code = answer.json()["error"]["code"]
        except (ValueError, KeyError, TypeError):
            code = None
        if answer.status_code not in (401, 403, 404) or code not in DENIALS:
            self.improper.append(f"{where} {code}")


def _request(
    server: Server, method: str, path: str, body: Any, header: str | None, **extra: Any
) -> httpx.Response:
    # Latin-1 bytes: HTTP header values are octets, and a client may send any of them.
    headers = {} if header is None else {"Authorization": header.encode("latin-1")}
    if path.endswith("/events"):
        # A stream: a wrong credential must be refused at once, before anything is sent.
        with httpx.stream(
            method, f"{server.url}{path}", headers=headers, timeout=5, **extra
        ) as answer:
            if not answer.is_success:
                answer.read()
            return answer
    return httpx.request(
        method,
        f"{server.url}{path}",
        headers=headers,
        timeout=30,
        **({} if body is None else {"json": body}),
        **extra,
    )


def http_matrix(server: Server, world: dict[str, Any], tally: Tally) -> None:
    for routes, wrong in (
        (owner_routes(world), world["owner_wrong"]),
        (agent_routes(world), world["agent_wrong"]),
    ):
        for label, header in wrong.items():
            for method, path, body, scoped in routes:
                try:
                    answer = _request(server, method, path, body, header)
                except httpx.HTTPError as exc:
                    tally.requests += 1
                    tally.improper.append(f"{label} → {method} {path}: {type(exc).__name__}")
                    continue
                tally.http(label, f"{method} {path}", answer, scoped)


def _csrf(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found is not None, page[:500]
    return found.group(1)


def panel_matrix(server: Server, world: dict[str, Any], tally: Tally) -> None:
    """Bob signed in to the panel, no session, and a forged session, on ann's pages."""
    bob = httpx.Client(base_url=server.url, timeout=30)
    form = bob.get("/panel/login")
    bob.post(
        "/panel/login",
        data={"csrf": _csrf(form.text), "token": world["bob"].token, "next": "/panel/review"},
    )
    bob_csrf = _csrf(bob.get("/panel/review").text)
    nb, pending = world["notebook"], world["pending"]
    routes: list[tuple[str, str, dict[str, str] | None, bool]] = [
        ("GET", f"/panel/notebooks/{nb}", None, False),
        ("GET", f"/panel/notebooks/{nb}/state", None, False),
        ("GET", f"/panel/notebooks/{nb}/forget", None, False),
        ("POST", f"/panel/notebooks/{nb}/forget", {"confirm": "yes"}, False),
        (
            "POST",
            f"/panel/notebooks/{nb}/proposals",
            {"name": "note:secret", "document": "d", "passage": "p", "locator": "l"},
            False,
        ),
        ("POST", f"/panel/review/{pending}/decision", {"decision": "accept", "reason": "x"}, False),
        ("GET", "/panel/review", None, True),
    ]
    sessions = {
        "panel: another owner's session": (dict(bob.cookies), bob_csrf),
        "panel: no session": ({}, bob_csrf),
        "panel: forged session": ({SESSION_COOKIE: f"ann.{'A' * 43}"}, bob_csrf),
    }
    for label, (cookies, csrf) in sessions.items():
        client = httpx.Client(base_url=server.url, cookies=cookies, timeout=30)
        for method, path, data, scoped in routes:
            answer = client.request(
                method, path, data=None if data is None else {**data, "csrf": csrf}
            )
            tally.requests += 1
            where = f"{label} → {method} {path}: {answer.status_code}"
            if tally.leaks(answer.text):
                tally.crossed.append(where)
            elif answer.status_code == 303:
                target = answer.headers.get("location", "")
                if "/panel/login" not in target:
                    tally.crossed.append(f"{where} → {target}")
            elif answer.is_success and not scoped:
                tally.crossed.append(where)
            elif not answer.is_success and answer.status_code not in (401, 403, 404):
                tally.improper.append(where)


def _mcp(server: Server, header: str | None, method: str, params: dict[str, Any]) -> httpx.Response:
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    headers: dict[str, Any] = dict(MCP_HEADERS)
    if header is not None:
        headers["Authorization"] = header.encode("latin-1")
    return httpx.post(f"{server.url}/mcp", json=message, headers=headers, timeout=30)


def mcp_matrix(server: Server, world: dict[str, Any], tally: Tally) -> None:
    """Every MCP request with every credential but ann's agent token for the notebook."""
    write = {"op": "add", "record": {"name": "note:intruder", "text": "x"}}
    requests = [
        (
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "matrix", "version": "1"},
            },
        ),
        ("tools/list", {}),
        ("resources/read", {"uri": "oh://bootstrap"}),
        *(
            ("tools/call", {"name": tool, "arguments": arguments})
            for tool, arguments in (
                ("remember", {"based_on": 1, "request_id": "x", "changes": [write]}),
                ("remember", {"based_on": 1, "request_id": "s", "changes": [write]}),
                ("query", {"question": "current_notes"}),
                ("read", {"name": "note:secret"}),
                ("explain", {"token": world["explain"], "row": 0}),
                ("recall", {"text": "secret"}),
            )
        ),
    ]
    valid_elsewhere = {"another owner's agent", "her other notebook's agent"}
    credentials = {**world["owner_wrong"], **world["agent_wrong"]}
    del credentials["her own agent token"]  # the right one here: the token chooses the notebook
    for label, header in credentials.items():
        for method, params in requests:
            try:
                answer = _mcp(server, header, method, params)
            except httpx.HTTPError as exc:
                tally.requests += 1
                tally.improper.append(f"MCP {label} → {method}: {type(exc).__name__}")
                continue
            tally.requests += 1
            where = f"MCP {label} → {method} {params.get('name', '')}: {answer.status_code}"
            if tally.leaks(answer.text, knowledge_allowed=label == "her other notebook's agent"):
                tally.crossed.append(where)
                continue
            if method != "tools/call" or label in valid_elsewhere:
                continue  # answered about the caller's own notebook, or nothing at all
            try:
                result = answer.json()["result"]
                code = result["structuredContent"]["error"]["code"]
            except (ValueError, KeyError, TypeError):
                tally.improper.append(f"{where} {answer.text[:100]}")
                continue
            if not result.get("isError") or code not in DENIALS | {"purged"}:
                tally.improper.append(f"{where} {code}")


def state_of(world: dict[str, Any]) -> Any:
    ann = world["ann"].http
    nb = world["notebook"]
    notebook = ann.get(f"/v1/notebooks/{nb}").json()
    records = ann.get(f"/v1/notebooks/{nb}/records").json()
    knowledge = ann.get("/v1/knowledge").json()
    document = ann.put("/v1/documents/ann-doc").status_code  # 200: still hers, not created
    return json.dumps([notebook, records, knowledge, document], sort_keys=True)


def run(directory: Path, seed: int) -> dict[str, Any]:
    with Server(directory / "data") as server:
        return run_on(server, seed)


def run_on(server: Server, seed: int) -> dict[str, Any]:
    """The matrix against a running server (its owners ann and bob are created here)."""
    world = setup(server)
    before = state_of(world)
    tally = Tally(world)
    http_matrix(server, world, tally)
    panel_matrix(server, world, tally)
    mcp_matrix(server, world, tally)
    after = state_of(world)
    # The right credentials still get through.
    readable = _agent(server, world["agent"], world["notebook"], "read", {"name": "note:secret"})
    changed = before != after
    crossings = len(tally.crossed) + (1 if changed else 0)
    return {
        "suite": "authorization",
        "seed": seed,
        "requests": tally.requests,
        "owner_credentials": len(world["owner_wrong"]),
        "agent_credentials": len(world["agent_wrong"]),
        "cross_owner_access": crossings,
        "state_changed": changed,
        "improper_refusals": len(tally.improper),
        "right_credential_reads": readable.get("text") == world["secrets"][0],
        "crossed": tally.crossed[:10],
        "improper": tally.improper[:20],
        "figure": (
            f"cross-owner access: {crossings} of {tally.requests} requests;"
            f" improper refusals: {len(tally.improper)}"
        ),
        "ok": crossings == 0 and not tally.improper and readable.get("text") == world["secrets"][0],
    }


def main() -> int:
    parser = common_arguments(__doc__)
    parser.add_argument("--keep", type=Path, default=None)
    args = parser.parse_args()
    seed = seed_of(args.seed)
    with scratch("oh-authz-", args.keep) as tmp:
        summary = run(tmp, seed)
    return report(summary, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
