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

Then the purge worker's credential (SPEC §3), which may tombstone a notebook past its forget
time (its content going with it) and mark empty one stuck opening past the grace, and nothing
else: every other thing is tried with it on notebooks in each situation (unexpired, expired,
forgotten, stuck opening, opening in progress) — as raw SQL on its own connection on the
embedded backend (state changes, forged stamps, deletes, inserts, reads of notes, PRAGMAs,
ATTACH, TEMP objects, dropping its checks) or as the purge role on PostgreSQL (the same SQL,
and its functions with forged values), and through its own methods with a forged ``now``. An
attempt got through if anything changed, a note or a not-yet-expired id came back, or a file
was left; afterwards the legitimate purge must still purge and empty exactly the right two.

    python stress/authz_matrix.py                # HTTP, MCP, panel; the embedded purge credential
    python stress/authz_matrix.py --postgres     # and the purge role on a throwaway PostgreSQL

Prints ``cross-owner access: 0`` and ``0 of N forbidden attempts got through``, and exits 1 on
any crossing, improper refusal or purge attempt that got through.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import re
import secrets
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from harness import (
    Server,
    Target,
    common_arguments,
    postgres_target,
    report,
    scratch,
    script_command,
    seed_of,
)
from oh.core.changes import parse_changes
from oh.core.clock import utc_text
from oh.core.notebook import new_notebook_id
from oh.testing.memory_store import T0
from oh.transports.panel.sessions import SESSION_COOKIE

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
        ("GET", "/v1/notebooks", None, True),  # any owner lists their own: never ann's
        ("GET", "/v1/notebooks?document=ann-doc&state=open", None, True),
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


# -- the purge credential ------------------------------------------------------------------------

# The purge worker's credential (``oh purge``) may tombstone a notebook past its forget time,
# taking its content with it, and mark empty one stuck opening past the grace; nothing else.
# Here every other thing is tried with it, as raw SQL on its own connection (the embedded
# backend) or as the purge role (PostgreSQL), and through its own methods with forged values.
# The database judges by its own clock, so "not expired" is a notebook forgetting a century
# after T0 and "opening in progress" one started then.
CENTURY = timedelta(days=36525)
LATER = T0 + timedelta(hours=25)  # `old` is past its forget time, `stuck` past the grace
FAR = datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
MARKER = "PURGE-MUST-NOT-READ"

# (label, SQL with ? placeholders, parameters: "@name" is that notebook's id)
PURGE_SQL: list[tuple[str, str, tuple[str, ...]]] = [
    ("reopen a stuck opening", "UPDATE notebooks SET state = 'open' WHERE id = ?", ("@stuck",)),
    ("open a fresh opening", "UPDATE notebooks SET state = 'open' WHERE id = ?", ("@opening",)),
    (
        "tombstone an unexpired notebook",
        "UPDATE notebooks SET state = 'purged', purged_at = ? WHERE id = ?",
        (utc_text(FAR), "@young"),
    ),
    (
        "delete an unexpired notebook's notes",
        "DELETE FROM records WHERE notebook_id = ?",
        ("@young",),
    ),
    ("delete an unexpired notebook's log", "DELETE FROM log WHERE notebook_id = ?", ("@young",)),
    ("delete notes, keep the notebook", "DELETE FROM records WHERE notebook_id = ?", ("@old",)),
    (
        "empty a fresh opening",
        "UPDATE notebooks SET state = 'empty', purged_at = ? WHERE id = ?",
        (utc_text(FAR), "@opening"),
    ),
    (
        "empty an open notebook",
        "UPDATE notebooks SET state = 'empty', purged_at = ? WHERE id = ?",
        (utc_text(LATER), "@old"),
    ),
    (
        "tombstone with a malformed stamp",
        "UPDATE notebooks SET state = 'purged', purged_at = 'soon' WHERE id = ?",
        ("@old",),
    ),
    ("un-purge", "UPDATE notebooks SET state = 'open' WHERE id = ?", ("@gone",)),
    (
        "restamp a tombstone",
        "UPDATE notebooks SET purged_at = ? WHERE id = ?",
        (utc_text(LATER), "@gone"),
    ),
    (
        "move a forget time",
        "UPDATE notebooks SET forgets_at = ? WHERE id = ?",
        (utc_text(FAR), "@young"),
    ),
    (
        "move a start time",
        "UPDATE notebooks SET started_at = ? WHERE id = ?",
        (utc_text(T0), "@opening"),
    ),
    ("change an owner", "UPDATE notebooks SET owner = 'mallory' WHERE id = ?", ("@young",)),
    ("change a note", "UPDATE records SET content = '{}' WHERE notebook_id = ?", ("@young",)),
    (
        "create a notebook",
        "INSERT INTO notebooks (id, owner, document, run, state, started_at, forgets_at,"
        " version, head_hash) VALUES ('nb_new', 'o', 'd', 'r', 'open', 'a', 'b', 0, 'h')",
        (),
    ),
    (
        "write a note",
        "INSERT INTO records (notebook_id, name, kind, content, digest, author, written_at,"
        " version) VALUES (?, 'note:x', 'note', '{}', 'd', 'a', 'w', 1)",
        ("@young",),
    ),
    ("delete a tombstone", "DELETE FROM notebooks WHERE id = ?", ("@gone",)),
    ("read a note", "SELECT content FROM records WHERE notebook_id = ?", ("@young",)),
    ("read a log", "SELECT content, request_id FROM log WHERE notebook_id = ?", ("@young",)),
    ("read names", "SELECT name, digest FROM records WHERE notebook_id = ?", ("@young",)),
    ("read who", "SELECT owner, document, run FROM notebooks WHERE id = ?", ("@young",)),
]
LIBSQL_ONLY = [
    "PRAGMA journal_mode=DELETE",
    "PRAGMA secure_delete=OFF",
    "PRAGMA synchronous=OFF",
    "PRAGMA foreign_keys=ON",
    "PRAGMA writable_schema=ON",
    "PRAGMA recursive_triggers=ON",
    "PRAGMA query_only=ON",
    "PRAGMA user_version=7",
    "PRAGMA wal_checkpoint(TRUNCATE)",
    "PRAGMA optimize",
    "ATTACH DATABASE ':memory:' AS stash",
    "VACUUM INTO 'stash-copy.db'",
    "VACUUM",
    "ANALYZE",
    "CREATE TABLE stash (content TEXT)",
    "CREATE TEMP TABLE stash (content TEXT)",
    "CREATE TEMP VIEW notebooks AS SELECT 1 AS id",
    "CREATE TEMP TRIGGER quiet BEFORE UPDATE ON main.notebooks BEGIN SELECT 1; END",
    "DROP TRIGGER temp.oh_purge_changes",
    "DROP TRIGGER temp.oh_purge_content",
    "DROP TRIGGER notebooks_stay_purged",
    "DROP TABLE records",
    "ALTER TABLE notebooks ADD COLUMN note TEXT",
    "SELECT load_extension('libstash')",
    "SELECT sql FROM sqlite_temp_master",
    "DELETE FROM records RETURNING content",
]
POSTGRES_ONLY: list[tuple[str, tuple[str, ...]]] = [
    ("SELECT oh_purge_notebook(?, ?)", ("@young", utc_text(FAR))),
    ("SELECT oh_purge_notebook(?, ?)", ("@old", "soon")),
    ("SELECT oh_purge_notebook(?, ?)", ("@old", "")),
    ("SELECT oh_mark_empty(?, ?, ?)", ("@opening", utc_text(FAR), utc_text(FAR))),
    ("SELECT oh_mark_empty(?, ?, ?)", ("@stuck", utc_text(FAR), "soon")),
    ("SELECT oh_delete_content(?)", ("@young",)),
    ("SELECT * FROM oh_expired_notebooks(?, 100)", (utc_text(FAR),)),
    ("SELECT * FROM oh_stale_openings(?, 100)", (utc_text(FAR),)),
    ("TRUNCATE records", ()),
    ("CREATE TABLE stash (content TEXT)", ()),
    ("SET ROLE oh_app", ()),
    ("CHECKPOINT", ()),
]


def purge_world(target: Target) -> dict[str, str]:
    """One notebook in each situation, written by the application, then closed."""
    from oh.services.notebooks import Notebooks

    store = target.open()
    try:
        clock = lambda: T0  # noqa: E731 - the injected clock of every write here
        young = Notebooks(store, clock=clock, lifetime=CENTURY).open("ann", "doc", "young")
        old = Notebooks(store, clock=clock).open("ann", "doc", "old")
        gone = Notebooks(store, clock=clock).open("ann", "doc", "gone")
        for notebook in (young, old, gone):
            store.remember(
                notebook.id,
                based_on=0,
                request_id="r-1",
                changes=parse_changes(
                    [{"op": "add", "record": {"name": "note:a", "text": MARKER}}]
                ),
                author="agent:purge-matrix",
                now=T0,
            )
        store.forget(gone.id, T0)
        ids = {"young": young.id, "old": old.id, "gone": gone.id}
        for name, started in (("stuck", T0), ("opening", T0 + CENTURY)):
            ids[name] = new_notebook_id()
            store.create_notebook(
                ids[name],
                owner="ann",
                document="doc",
                run=name,
                started_at=started,
                forgets_at=started + timedelta(hours=24),
            )
        return ids
    finally:
        store.close()


def _observer(target: Target, access: Any) -> Any:
    """A reader of every row, apart from the purge credential: on the embedded backend the
    same SQLite library as the credential (two libraries in one process would not share their
    POSIX locks), connected only while it reads (so a journal-mode switch would not merely find
    the file busy), plus the credential's own connection settings; on PostgreSQL the
    application role."""
    if target.kind == "postgres":
        return lambda: target.execute(
            "SELECT id, state, started_at, forgets_at, purged_at, owner, version,"
            " (SELECT count(*) FROM records r WHERE r.notebook_id = n.id),"
            " (SELECT count(*) FROM log l WHERE l.notebook_id = n.id)"
            " FROM notebooks n ORDER BY id"
        )
    import sqlite3

    from oh.storage.sqlite.notebooks import purge_authorizer

    def own_settings() -> list[Any]:
        conn = access._conn
        conn.set_authorizer(None)  # the test looks; the attacker's statements never do
        try:
            settings = ("secure_delete", "synchronous", "foreign_keys", "recursive_triggers")
            triggers = "SELECT name FROM sqlite_temp_master ORDER BY name"
            return [conn.execute(f"PRAGMA {p}").fetchall() for p in settings] + [
                conn.execute(triggers).fetchall()
            ]
        finally:
            conn.set_authorizer(purge_authorizer)

    def rows() -> Any:
        conn = sqlite3.connect(target.location, isolation_level=None)
        try:
            tables = [
                t for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            ]
            state = {
                t: sorted(map(repr, conn.execute(f"SELECT * FROM {t}"))) for t in sorted(tables)
            }
            schema = sorted(conn.execute("SELECT type, name, sql FROM sqlite_master").fetchall())
            header = [
                conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("journal_mode", "user_version")
            ]
        finally:
            conn.close()
        return state, schema, header, own_settings()

    return rows


def purge_attempts(target: Target, ids: dict[str, str]) -> dict[str, Any]:
    """Every forbidden attempt through the purge credential, then the purge it may do."""
    from oh.services.notebooks import purge_expired

    access = target.purge_access()
    snapshot = _observer(target, access)
    attempts: list[tuple[str, str, tuple[Any, ...]]] = list(PURGE_SQL)
    if target.kind == "libsql":
        attempts += [(sql, sql, ()) for sql in LIBSQL_ONLY]
    else:
        attempts += [(f"{sql} {params}", sql, params) for sql, params in POSTGRES_ONLY]
    through: list[str] = []
    refused = 0
    try:
        for label, sql, params in attempts:
            values = tuple(ids[p[1:]] if str(p).startswith("@") else p for p in params)
            before = snapshot()
            try:
                answer = repr(_as_purge(target, access, sql, values))
            except Exception as exc:  # the refusal: its type differs by driver
                answer = f"refused: {type(exc).__name__}"
                refused += 1
            listed = [i for name, i in ids.items() if name in ("young", "opening") and i in answer]
            if snapshot() != before or MARKER in answer or listed:
                through.append(f"{label}: {answer[:120]}")
        # Its own methods with a forged "now" and cutoff.
        forged = [
            ("list unexpired as expired", access.expired(FAR), [ids["old"]]),
            ("list fresh openings as stuck", access.stale_openings(FAR), [ids["stuck"]]),
            ("purge early", access.purge([ids["young"]], FAR), {}),
            ("empty early", access.mark_empty([ids["opening"]], FAR, FAR), []),
        ]
        for label, got, allowed in forged:
            if got != allowed:
                through.append(f"{label}: {got!r}")
        attempted = len(attempts) + len(forged)
        # What it may do, by the injected clock: the expired one and the stuck one, nothing else.
        report = purge_expired(access, LATER)
        again = purge_expired(access, FAR)
        legitimate = (
            report.purged == [ids["old"]]
            and report.emptied == [ids["stuck"]]
            and again.purged == again.emptied == []
        )
    finally:
        access.close()
    return {
        "backend": target.kind,
        "attempts": attempted,
        "refused_with_an_error": refused,
        "got_through": through,
        "legitimate_purge": legitimate,
    }


def _as_purge(target: Target, access: Any, sql: str, params: tuple[Any, ...]) -> Any:
    if target.kind == "libsql":
        return access._conn.execute(sql, params).fetchall()
    import psycopg

    with psycopg.connect(target.purge_location, autocommit=True) as conn:
        text = sql.replace("?", "%s") if params else sql
        cursor = conn.execute(text, params or None)
        return cursor.fetchall() if cursor.description else cursor.rowcount


def purge_matrix(target: Target) -> dict[str, Any]:
    """The purge credential's attempts on ``target``: on the embedded backend in a process of its
    own (as ``oh purge`` runs), after the application wrote the notebooks and closed."""
    ids = purge_world(target)
    if target.kind == "postgres":
        result = purge_attempts(target, ids)
    else:
        done = subprocess.run(
            script_command(
                "authz_matrix.py", "--purge-attempts", json.dumps(target.to_json()), json.dumps(ids)
            ),
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
            cwd=Path(target.location).parent,  # where a VACUUM INTO would leave its copy
        )
        if done.returncode != 0:
            return {
                "backend": target.kind,
                "attempts": 0,
                "got_through": [done.stderr[-2000:]],
                "legitimate_purge": False,
            }
        result = json.loads(done.stdout.strip().splitlines()[-1])
    stash = (
        [p.name for p in Path(target.location).parent.glob("stash*")]
        if target.kind == "libsql"
        else []
    )
    result["got_through"] += [f"left a file: {name}" for name in stash]
    result["ok"] = not result["got_through"] and result["legitimate_purge"]
    return result


def run(directory: Path, seed: int, *, postgres: bool = False) -> dict[str, Any]:
    """The matrix over HTTP, MCP and the panel, then the purge credential's (embedded, and on
    a throwaway PostgreSQL with ``postgres``)."""
    with Server(directory / "data") as server:
        summary = run_on(server, seed)
    (directory / "purge").mkdir()
    purges = [purge_matrix(Target.libsql(directory / "purge"))]
    if postgres:
        with postgres_target() as target:
            purges.append(purge_matrix(target))
    through = sum(len(p["got_through"]) for p in purges)
    attempts = sum(p["attempts"] for p in purges)
    summary["purge_credential"] = purges
    summary["figure"] += (
        f"; purge credential ({', '.join(p['backend'] for p in purges)}):"
        f" {through} of {attempts} forbidden attempts got through"
    )
    summary["ok"] = summary["ok"] and all(p["ok"] for p in purges)
    return summary


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
    if len(sys.argv) > 3 and sys.argv[1] == "--purge-attempts":
        # The embedded purge credential's own process (see purge_matrix).
        target, ids = Target.from_json(sys.argv[2]), json.loads(sys.argv[3])
        print(json.dumps(purge_attempts(target, ids)))
        return 0
    parser = common_arguments(__doc__)
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument(
        "--postgres", action="store_true", help="also try the purge role on a throwaway PostgreSQL"
    )
    args = parser.parse_args()
    seed = seed_of(args.seed)
    with scratch("oh-authz-", args.keep) as tmp:
        summary = run(tmp, seed, postgres=args.postgres)
    return report(summary, args.json)


if __name__ == "__main__":
    raise SystemExit(main())
