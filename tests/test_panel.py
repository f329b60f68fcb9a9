"""The Memory panel and the review page (docs/panel.md), in a real headless Chromium.

The reference host's app runs under uvicorn on 127.0.0.1; an "agent" writes through the HTTP
tool routes, the owner signs in through the login form and works the panel like a person would.
The first tests here need no browser: the sign-in cookie, CSRF, owner isolation and error pages,
checked over plain HTTP.

The browser is Debian's Chromium (``scripts/install-chromium``) driven by Playwright's Python
package; ``playwright install`` is never run. Outside CI the browser tests are skipped when
either is missing; under CI they fail instead, so a missing browser cannot pass unnoticed.
"""

from __future__ import annotations

import base64
import html
import inspect
import json
import os
import re
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

import oh.transports.http
from oh.config import Locations, UnsealedWarning, open_host
from oh.core.clock import Clock, system_clock
from oh.host import Host, HostSettings
from oh.profiles import shipped_pack
from oh.testing.browser import chromium
from oh.testing.knowledge import SOURCE
from oh.testing.lifecycle import FakeClock
from oh.testing.served import free_port, in_thread
from oh.transports.http import create_app
from oh.transports.panel import SESSION_COOKIE, owner_from_request, panel_router
from oh.transports.panel.notebooks import DOCUMENTS_PAGE_SIZE, NOTEBOOKS_PAGE_SIZE, NOTEBOOKS_SHOWN

HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def _unmasked_page(text: str) -> str:
    """A page with its CSRF token left out: each page masks it afresh (docs/panel.md, CSRF)."""
    return CSRF.sub('name="csrf" value=""', text)


def _app(host: Host) -> FastAPI:
    """The host's app with the panel, whether or not create_app includes it already."""
    app = create_app(host)
    if not any(getattr(route, "path", None) == "/panel/login" for route in app.routes):
        app.include_router(panel_router(host))
    return app


def _events_accept_the_cookie() -> bool:
    return "owner_from_request" in inspect.getsource(oh.transports.http)


# -- a host with owners, documents and an agent ---------------------------------------------


@dataclass
class Opened:
    id: str
    agent: httpx.Client
    version: int = 0

    def remember(self, *changes: dict[str, Any]) -> dict[str, Any]:
        answer = self.agent.post(
            f"/v1/notebooks/{self.id}/tools/remember",
            json={
                "based_on": self.version,
                "request_id": f"r-{self.version}",
                "changes": list(changes),
            },
        )
        body: dict[str, Any] = answer.json()
        assert body.get("status") == "applied", body
        self.version = body["version"]
        return body


def _add(name: str, text: str, **links: list[str]) -> dict[str, Any]:
    return {"op": "add", "record": {"name": name, "text": text, **links}}


def _replace(name: str, text: str, **links: list[str]) -> dict[str, Any]:
    return {"op": "replace", "record": {"name": name, "text": text, **links}}


class World:
    """One host, its app, and the owners alice and bob, reachable at ``url``."""

    def __init__(
        self,
        data: Path,
        url: str = "http://testserver",
        clock: Clock = system_clock,
        sealed: bool = True,
    ) -> None:
        self.url = url
        # The real clock by default, deliberately: the browser tests compare the host's forget
        # time with Chromium's Date.now(), which no injected clock or clock shift reaches. Every
        # other time these tests compare is the host's own (so this module cannot run shifted);
        # the plain-HTTP tests pass an injected clock.
        self.host = open_host(
            Locations(data, sealed=sealed), settings=HostSettings(public_url=url), clock=clock
        )
        self.app = _app(self.host)
        self.tokens = {name: self.host.create_owner_token(name) for name in ("alice", "bob")}

    def owner(self, name: str, client: Any = None) -> Any:
        client = client or httpx.Client(base_url=self.url, timeout=10)
        client.headers["authorization"] = f"Bearer {self.tokens[name]}"
        return client

    def open(self, owner: Any, document: str, run: str, agent: Any) -> Opened:
        owner.put(f"/v1/documents/{document}")
        answer = owner.post(f"/v1/documents/{document}/notebooks", json={"run": run})
        assert answer.status_code in (200, 201), answer.text
        body = answer.json()
        agent.headers["authorization"] = f"Bearer {body['agent_token']}"
        return Opened(body["notebook"]["id"], agent, body["notebook"]["version"])


# -- over plain HTTP ---------------------------------------------------------------------------


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path)


def _client(world: World) -> TestClient:
    return TestClient(world.app, follow_redirects=False)


def _sign_in(client: TestClient, token: str, next_url: str = "") -> TestClient:
    form = client.get("/panel/login")
    csrf = CSRF.search(form.text)
    assert csrf is not None
    answer = client.post(
        "/panel/login", data={"csrf": csrf.group(1), "token": token, "next": next_url}
    )
    assert answer.status_code == 303, answer.text
    return client


def _alice_notebook(world: World) -> Opened:
    owner = world.owner("alice", _client(world))
    opened = world.open(owner, "reef.pdf", "run-1", _client(world))
    opened.remember(_add("lead:reef-survey-2016", "methods section missing"))
    return opened


def test_the_login_cookie_is_signed_http_only_strict_and_holds_no_token(world: World) -> None:
    client = _client(world)
    form = client.get("/panel/login")
    csrf = CSRF.search(form.text)
    assert csrf is not None
    answer = client.post(
        "/panel/login", data={"csrf": csrf.group(1), "token": world.tokens["alice"], "next": ""}
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == "/panel/review"
    cookie = next(
        c for c in answer.headers.get_list("set-cookie") if c.startswith(SESSION_COOKIE + "=")
    )
    assert "HttpOnly" in cookie
    assert "SameSite=strict" in cookie
    assert world.tokens["alice"] not in cookie
    assert client.get("/panel/review").status_code == 200


def test_a_wrong_owner_token_is_refused_on_the_login_form(world: World) -> None:
    client = _client(world)
    csrf = CSRF.search(client.get("/panel/login").text)
    assert csrf is not None
    answer = client.post("/panel/login", data={"csrf": csrf.group(1), "token": "oho_nope"})
    assert answer.status_code == 401
    assert "not a valid owner token" in answer.text
    assert SESSION_COOKIE not in client.cookies


def test_the_login_form_needs_its_own_csrf_token(world: World) -> None:
    client = _client(world)
    client.get("/panel/login")
    answer = client.post("/panel/login", data={"csrf": "0" * 64, "token": world.tokens["alice"]})
    assert answer.status_code == 403
    assert "forbidden" in answer.text
    assert SESSION_COOKIE not in client.cookies


def test_login_goes_back_only_to_a_panel_page(world: World) -> None:
    for evil in ("//evil.example/panel/", "https://evil.example/", "/v1/knowledge", "/panel/\\x"):
        client = _client(world)
        csrf = CSRF.search(client.get("/panel/login").text)
        assert csrf is not None
        answer = client.post(
            "/panel/login",
            data={"csrf": csrf.group(1), "token": world.tokens["alice"], "next": evil},
        )
        assert answer.headers["location"] == "/panel/review", evil


def test_a_page_without_a_session_sends_the_browser_to_the_login_form(world: World) -> None:
    opened = _alice_notebook(world)
    answer = _client(world).get(f"/panel/notebooks/{opened.id}")
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/panel/login?next=/panel/notebooks/{opened.id}"


def test_a_cross_site_link_reloads_once_to_send_the_strict_cookie_but_never_its_query(
    world: World,
) -> None:
    """Another site may link to a page of the panel, not search it: the reload drops the
    query, so a search another site starts never runs with the owner's cookie."""
    opened = _alice_notebook(world)
    answer = _client(world).get(
        f"/panel/notebooks/{opened.id}",
        params={"q": "guess", "kind": "lead"},
        headers={"sec-fetch-site": "cross-site"},
    )
    assert answer.status_code == 200
    assert f'<meta http-equiv="refresh" content="0; url=./{opened.id}">' in answer.text
    assert "guess" not in answer.text


def test_the_csrf_token_a_page_carries_is_different_on_every_page_and_each_one_works(
    world: World,
) -> None:
    """Pages are sent compressed and echo a search: a secret that were the same on every page
    could be guessed from their sizes (BREACH), so the token is masked afresh each time."""
    opened = _alice_notebook(world)
    client = _sign_in(_client(world), world.tokens["alice"])
    tokens = []
    for _ in range(3):
        found = CSRF.search(client.get(f"/panel/notebooks/{opened.id}", params={"q": "x"}).text)
        assert found is not None
        tokens.append(found.group(1))
    assert len(set(tokens)) == 3
    login = [CSRF.search(_client(world).get("/panel/login").text) for _ in range(2)]
    assert login[0] is not None and login[1] is not None
    assert login[0].group(1) != login[1].group(1)
    for token in tokens:  # each one is accepted (here: the forget confirmation refuses no csrf)
        answer = client.post(
            f"/panel/notebooks/{opened.id}/notes/forget",
            data={"csrf": token, "name": "lead:nothing-here", "confirm": "yes"},
        )
        assert answer.status_code == 404, answer.text  # past the CSRF check: no such note
    for forged in ("", "x", tokens[0][:-2], "A" * 200, tokens[0] + "AA"):
        answer = client.post(
            f"/panel/notebooks/{opened.id}/notes/forget",
            data={"csrf": forged, "name": "lead:nothing-here", "confirm": "yes"},
        )
        assert answer.status_code == 403, forged


def test_a_forged_or_altered_session_cookie_is_no_session(world: World) -> None:
    opened = _alice_notebook(world)
    client = _sign_in(_client(world), world.tokens["bob"])
    payload, mac = client.cookies[SESSION_COOKIE].split(".")
    # Claim to be alice with bob's mac, then with no mac at all, then with a wrong one.
    body = json.loads(base64.urlsafe_b64decode(payload + "=="))
    body["o"] = "alice"
    forged = base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")
    for value in (f"{forged}.{mac}", forged, f"{payload}.{'0' * 64}"):
        answer = _client(world).get(
            f"/panel/notebooks/{opened.id}", headers={"cookie": f"{SESSION_COOKIE}={value}"}
        )
        assert answer.status_code == 303, value
        assert answer.headers["location"].startswith("/panel/login")


def test_every_form_post_without_the_csrf_token_is_forbidden(world: World) -> None:
    opened = _alice_notebook(world)
    client = _sign_in(_client(world), world.tokens["alice"])
    posts = [
        (f"/panel/notebooks/{opened.id}/forget", {"confirm": "yes"}),
        (
            f"/panel/notebooks/{opened.id}/proposals",
            {
                "name": "lead:reef-survey-2016",
                "document": "reef.pdf",
                "passage": "p",
                "locator": "p. 1",
            },
        ),
        ("/panel/review/pr_x/decision", {"decision": "reject", "reason": "no"}),
        ("/panel/logout", {}),
    ]
    for path, fields in posts:
        for csrf in (None, "", "0" * 64):
            data = fields if csrf is None else {**fields, "csrf": csrf}
            answer = client.post(path, data=data)
            assert answer.status_code == 403, (path, csrf)
            assert '<code class="code">forbidden</code>' in answer.text
    assert world.host.notebook("alice", opened.id).state == "open"
    assert world.host.proposals("alice") == []


def test_a_form_post_without_a_session_is_unauthenticated(world: World) -> None:
    opened = _alice_notebook(world)
    answer = _client(world).post(
        f"/panel/notebooks/{opened.id}/forget", data={"confirm": "yes", "csrf": "x"}
    )
    assert answer.status_code == 401
    assert "unauthenticated" in answer.text
    assert world.host.notebook("alice", opened.id).state == "open"


def test_another_owner_learns_nothing_and_changes_nothing(world: World) -> None:
    opened = _alice_notebook(world)
    bob = _sign_in(_client(world), world.tokens["bob"])
    csrf = CSRF.search(bob.get("/panel/review").text)
    assert csrf is not None
    unknown = bob.get("/panel/notebooks/nb_00000000000000000000000000000000")
    for answer in (
        bob.get(f"/panel/notebooks/{opened.id}"),
        bob.get(f"/panel/notebooks/{opened.id}/forget"),
        bob.post(
            f"/panel/notebooks/{opened.id}/forget", data={"confirm": "yes", "csrf": csrf.group(1)}
        ),
        bob.post(
            f"/panel/notebooks/{opened.id}/proposals",
            data={
                "csrf": csrf.group(1),
                "name": "lead:reef-survey-2016",
                "document": "reef.pdf",
                "passage": "p",
                "locator": "p. 1",
            },
        ),
    ):
        assert answer.status_code == 404
        assert "methods section missing" not in answer.text
        assert "reef.pdf" not in answer.text
        assert _unmasked_page(answer.text.replace(opened.id, "ID")) == _unmasked_page(
            unknown.text.replace("nb_00000000000000000000000000000000", "ID")
        )
    assert bob.get(f"/panel/notebooks/{opened.id}/state").status_code == 404
    assert world.host.notebook("alice", opened.id).state == "open"
    assert world.host.proposals("alice") == []


def test_a_past_version_that_does_not_match_its_digest_is_shown_as_such_not_its_text(
    tmp_path: Path,
) -> None:
    # Plain storage (the opt-out), so that the text can be altered in place: sealed text
    # altered does not open at all (tests/test_sealed_notebooks.py).
    with pytest.warns(UnsealedWarning):
        world = World(tmp_path, sealed=False)
    opened = _alice_notebook(world)
    opened.remember(_replace("lead:reef-survey-2016", "methods in the annex"))
    conn = sqlite3.connect(str(tmp_path / "memory.db"), isolation_level=None)
    conn.execute("UPDATE log SET content = replace(content, 'missing', 'fine') WHERE version = 1")
    conn.close()
    owner = _sign_in(_client(world), world.tokens["alice"])
    page = owner.get(f"/panel/notebooks/{opened.id}")
    assert page.status_code == 200
    assert "methods section fine" not in page.text
    assert "methods in the annex" in page.text
    # The history, on its page (the list loads it in place when a record is opened).
    history = owner.get(
        f"/panel/notebooks/{opened.id}/history", params={"name": "lead:reef-survey-2016"}
    )
    assert history.status_code == 200
    assert history.text.count("this version does not match its digest") == 1
    assert "methods section fine" not in history.text
    assert "methods in the annex" in history.text


def test_errors_are_small_html_pages_with_their_code(world: World) -> None:
    opened = _alice_notebook(world)
    client = _sign_in(_client(world), world.tokens["alice"])
    csrf = CSRF.search(client.get(f"/panel/notebooks/{opened.id}").text)
    assert csrf is not None
    empty_passage = client.post(
        f"/panel/notebooks/{opened.id}/proposals",
        data={
            "csrf": csrf.group(1),
            "name": "lead:reef-survey-2016",
            "document": "reef.pdf",
            "passage": " ",
            "locator": "p. 1",
        },
    )
    cases = [
        (empty_passage, 400, "invalid_argument"),
        (client.get("/panel/no-such-page"), 404, "not_found"),
        (client.get("/panel/review?revision=x"), 400, "invalid_argument"),
        (client.get("/panel/review?revision=99"), 404, "not_found"),
        (
            client.post("/panel/logout", content=b"\xff", headers={"content-type": "text/plain"}),
            400,
            "invalid_argument",
        ),
    ]
    for answer, status, code in cases:
        assert answer.status_code == status, (answer.status_code, answer.text[:300])
        assert answer.headers["content-type"].startswith("text/html")
        assert f'<code class="code">{code}</code>' in answer.text
        assert "Traceback" not in answer.text


def test_an_unexpected_failure_is_a_503_page_without_a_traceback(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = _alice_notebook(world)
    client = _sign_in(_client(world), world.tokens["alice"])

    def broken(*_args: Any) -> Any:
        raise RuntimeError("disk on fire at /secret/path")

    monkeypatch.setattr(world.host, "records", broken)
    answer = client.get(f"/panel/notebooks/{opened.id}")
    assert answer.status_code == 503
    assert '<code class="code">storage_unavailable</code>' in answer.text
    assert "disk on fire" not in answer.text
    assert "Traceback" not in answer.text


def test_owner_from_request_takes_the_bearer_then_the_cookie_on_reads_only(world: World) -> None:
    app = FastAPI()

    @app.api_route("/who", methods=["GET", "POST"])
    async def who(request: Request) -> dict[str, str]:
        try:
            return {"owner": owner_from_request(world.host, request)}
        except Exception as exc:
            return {"error": type(exc).__name__}

    session = _sign_in(_client(world), world.tokens["alice"]).cookies[SESSION_COOKIE]
    client = TestClient(app)
    bearer = {"authorization": f"Bearer {world.tokens['bob']}"}
    assert client.get("/who", headers=bearer).json() == {"owner": "bob"}
    lower = {"authorization": f"bearer  {world.tokens['bob']} "}
    assert client.get("/who", headers=lower).json() == {"owner": "bob"}
    client.cookies.set(SESSION_COOKIE, session)
    assert client.get("/who").json() == {"owner": "alice"}
    assert client.get("/who", headers={"authorization": "Bearer oho_wrong"}).json() == {
        "error": "Unauthenticated"
    }
    assert client.post("/who").json() == {"error": "Unauthenticated"}
    client.cookies.clear()
    assert client.get("/who").json() == {"error": "Unauthenticated"}


def test_a_proposal_from_the_panel_carries_the_cited_passage(world: World) -> None:
    opened = _alice_notebook(world)
    client = _sign_in(_client(world), world.tokens["alice"])
    csrf = CSRF.search(client.get(f"/panel/notebooks/{opened.id}").text)
    assert csrf is not None
    answer = client.post(
        f"/panel/notebooks/{opened.id}/proposals",
        data={
            "csrf": csrf.group(1),
            "name": "lead:reef-survey-2016",
            "document": "hughes-2018.pdf",
            "passage": "The survey omits its methods.\r\nSee appendix.",
            "locator": "p. 4, §2",
        },
    )
    assert answer.status_code == 303
    [proposal] = world.host.proposals("alice")
    assert proposal.source.to_json() == {
        "document": "hughes-2018.pdf",
        "passage": "The survey omits its methods.\nSee appendix.",
        "locator": "p. 4, §2",
    }
    assert proposal.note is not None and proposal.note["notebook"] == opened.id
    assert f"proposed={proposal.id}" in answer.headers["location"]
    assert answer.headers["location"].endswith("#record-lead:reef-survey-2016")


def _article(html: str, anchor: str) -> str:
    """The markup of the ``<article>`` whose id is ``anchor``."""
    start = html.index(f'id="{anchor}"')
    return html[start : html.index("</article>", start)]


def _research_world(tmp_path: Path) -> tuple[World, Opened, TestClient]:
    """alice with the Research profile installed and a notebook of notes; signed in."""
    world = World(tmp_path, clock=FakeClock())
    world.host._profiles.install("alice", shipped_pack("research"))
    opened = world.open(world.owner("alice", _client(world)), "reef.pdf", "run-1", _client(world))
    statement = {"statement": "Bleaching starts near 1 °C above the summer mean"}
    opened.remember(
        *(
            {"op": "add", "record": {"name": name, "text": text, "fields": statement}}
            for name, text in (
                ("finding:ready", "bleaching near 1 °C"),
                ("finding:blank", ""),
                ("finding:taken", "proposed elsewhere"),
                ("finding:mine", "proposed from here"),
            )
        ),
        _add("lead:guess", "maybe the 2014 dataset was revised"),
    )
    world.host._review.propose(
        "alice",
        source=SOURCE,
        record={"name": "finding:taken", "text": "a new record", "fields": statement},
    )
    world.host._review.propose("alice", source=SOURCE, notebook=opened.id, name="finding:mine")
    return world, opened, _sign_in(_client(world), world.tokens["alice"])


def test_propose_for_review_is_offered_only_for_notes_that_could_be_proposed_now(
    tmp_path: Path,
) -> None:
    world, opened, client = _research_world(tmp_path)
    page = client.get(f"/panel/notebooks/{opened.id}").text
    ready = _article(page, "record-finding:ready")
    assert 'id="record-finding:ready-propose"' in ready
    assert "propose-blocked" not in ready
    for name, why in (
        ("lead:guess", "reviewed records use the kinds of the installed profiles"),
        ("finding:blank", "reviewed knowledge needs text"),
        ("finding:taken", "another proposal for finding:taken waits for review"),
    ):
        article = _article(page, f"record-{name}")
        assert f'id="record-{name}-propose"' not in article, name
        assert "Propose for review" not in article, name
        assert 'class="propose-blocked"' in article and why in article, (name, article)
    mine = _article(page, "record-finding:mine")
    assert "Propose for review" not in mine
    assert "Proposed for review: <strong>pending</strong>" in mine
    assert len(world.host.proposals("alice")) == 2


def test_a_pending_proposal_a_pack_made_unacceptable_offers_only_reject(tmp_path: Path) -> None:
    world = World(tmp_path, clock=FakeClock())
    guess = world.host._review.propose(
        "alice", source=SOURCE, record={"name": "lead:guess", "text": "maybe revised"}
    )
    world.host._profiles.install("alice", shipped_pack("research"))
    client = _sign_in(_client(world), world.tokens["alice"])
    page = client.get("/panel/review").text
    article = _article(page, f"proposal-{guess.id}")
    assert "Cannot be accepted as proposed" in article and "(rule profile.kind)" in article
    assert 'value="accept"' not in article and 'name="text"' not in article
    assert 'value="reject"' in article
    csrf = CSRF.search(page)
    assert csrf is not None
    answer = client.post(
        f"/panel/review/{guess.id}/decision",
        data={"csrf": csrf.group(1), "decision": "reject", "reason": "no lead kind now"},
    )
    assert answer.status_code == 303
    assert world.host._review.store.proposal(guess.id).state == "rejected"


# -- in a real browser -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    port = free_port()
    world = World(tmp_path_factory.mktemp("panel"), f"http://127.0.0.1:{port}")
    with in_thread(world.app, port):
        yield world


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def pages(browser: Any) -> Iterator[list[Any]]:
    """Fresh browser contexts (one per person); closed after the test."""
    contexts: list[Any] = []
    opened: list[Any] = []

    class Pages(list[Any]):
        def new(self, **options: Any) -> Any:
            context = browser.new_context(**options)
            context.set_default_timeout(10_000)
            contexts.append(context)
            page = context.new_page()
            opened.append(page)
            return page

    yield Pages()
    for context in contexts:
        context.close()


def _login(page: Any, world: World, owner: str, path: str) -> None:
    """Open ``path``, land on the login form, sign in, come back to ``path``."""
    page.goto(world.url + path)
    assert "/panel/login" in page.url
    page.get_by_label("Owner token").fill(world.tokens[owner])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(world.url + path)


def _record(page: Any, anchor: str) -> Any:
    return page.locator(f'[id="{anchor}"]')


def _notebook(world: World, document: str, run: str) -> Opened:
    return world.open(
        world.owner("alice"), document, run, httpx.Client(base_url=world.url, timeout=10)
    )


def test_the_panel_shows_two_captioned_lists_with_history_and_links(
    served: World, pages: Any
) -> None:
    from playwright.sync_api import expect

    opened = _notebook(served, "reef.pdf", "lists")
    opened.remember(
        _add("dataset:noaa-2014", "NOAA series stops in 2014: ruled out"),
        _add("lead:reef-survey-2016", "survey methods section missing"),
    )
    written = opened.remember(
        _replace(
            "lead:reef-survey-2016",
            "survey methods section missing; check appendix",
            depends_on=["dataset:noaa-2014", "figure:fig-3"],
        )
    )
    page = pages.new()
    path = f"/panel/notebooks/{opened.id}"
    _login(page, served, "alice", path)

    expect(page.get_by_role("heading", name="Working notes")).to_be_visible()
    expect(page.locator("#notes-caption")).to_have_text(
        "Private notes the agent wrote for itself in this session"
    )
    expect(page.get_by_role("heading", name="Reviewed knowledge in view")).to_be_visible()
    expect(page.locator("#reviewed-caption")).to_have_text(
        "Reviewed knowledge the agent can read here but not change"
    )
    notes = page.locator("#notes article")
    expect(notes).to_have_count(2)
    expect(page.locator("#reviewed article")).to_have_count(0)
    expect(page.locator("#reviewed .empty")).to_have_text("No reviewed knowledge in view.")

    # The header: document, run, start, forget time with a live countdown, version, pin.
    session = page.locator("dl.session")
    expect(session).to_contain_text("reef.pdf")
    expect(session).to_contain_text("lists")
    expect(page.locator('[data-field="version"]')).to_have_text("2")
    countdown = page.locator(".countdown")
    expect(countdown).to_have_text(re.compile(r"\(in 23 h \d\d min \d\d s\)"))
    first = countdown.text_content()
    page.wait_for_timeout(1100)
    assert countdown.text_content() != first

    # A record is one line: name, the start of its text, kind, author, time, version; it
    # opens in place for the rest: digest, text, links, history (loaded when opened).
    lead = _record(page, "record-lead:reef-survey-2016")
    line = lead.locator("summary").first
    expect(line.locator(".name")).to_have_text("lead:reef-survey-2016")
    expect(line.locator(".first")).to_have_text("survey methods section missing; check appendix")
    expect(line.locator(".meta")).to_contain_text("agent:lists")
    expect(line.locator(".meta")).to_contain_text("version 2")
    expect(lead.locator(".kind")).to_have_text("lead")
    body = lead.locator(".body")
    expect(body).to_be_hidden()
    line.click()
    expect(body).to_be_visible()
    digest = written["written"][0]["digest"]
    expect(body.locator(":scope > .meta")).to_contain_text(digest[:12])
    expect(body.locator(":scope > .text")).to_have_text(
        "survey methods section missing; check appendix"
    )
    lead.get_by_text("History (2 versions)").click()
    versions = lead.locator(".history li")
    expect(versions).to_have_count(2)
    expect(versions.nth(0)).to_contain_text("version 2 · replaced")
    expect(versions.nth(1)).to_contain_text("version 1 · added")
    expect(versions.nth(1)).to_contain_text("survey methods section missing")

    # A link goes to the other record's anchor; a link to a missing record is shown as text.
    expect(lead.locator(".links .missing")).to_have_text("figure:fig-3")
    lead.get_by_role("link", name="dataset:noaa-2014").click()
    assert page.evaluate("decodeURIComponent(location.hash)") == "#record-dataset:noaa-2014"
    expect(page.locator(":target")).to_have_attribute("id", "record-dataset:noaa-2014")

    # A memory card's anchor opens the panel at the record, opened.
    page.goto(f"{served.url}{path}#record-lead:reef-survey-2016")
    expect(page.locator(":target")).to_have_attribute("id", "record-lead:reef-survey-2016")
    expect(page.locator(":target .body")).to_be_visible()

    # Accessible: landmarks, one h1, every visible field labelled, buttons named.
    expect(page.locator("header")).to_have_count(1)
    expect(page.locator("main")).to_have_count(1)
    expect(page.get_by_role("navigation", name="Panel")).to_have_count(1)
    expect(page.get_by_role("navigation", name="Lists on this page")).to_contain_text(
        "Working notes (2)"
    )
    expect(page.locator("h1")).to_have_count(1)
    unlabelled = page.evaluate(
        """[...document.querySelectorAll('input:not([type=hidden]), textarea')]
            .filter(f => f.labels.length === 0).map(f => f.name)"""
    )
    assert unlabelled == []
    assert page.evaluate(
        "[...document.querySelectorAll('button')].every(b => b.textContent.trim())"
    )


def test_on_a_phone_the_notebooks_table_breaks_no_time_or_state_mid_word(
    served: World, pages: Any
) -> None:
    opened = _notebook(served, "phone-table.pdf", "run-phone")
    opened.remember(_add("lead:phone", "on a phone"))
    page = pages.new(viewport={"width": 390, "height": 800})
    _login(page, served, "alice", "/panel/notebooks")
    broken = page.evaluate(
        """[...document.querySelectorAll('section.document td time, section.document td .badge')]
            .filter(e => e.getClientRects().length !== 1).map(e => e.textContent)"""
    )
    assert page.locator("section.document td time").count() > 0
    assert broken == []
    overflow = page.evaluate(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    assert overflow <= 0  # the table scrolls inside its section, not the page


def test_what_changed_since_the_owner_last_looked_is_marked_and_so_is_what_arrives_live(
    served: World, pages: Any
) -> None:
    from playwright.sync_api import expect

    opened = _notebook(served, "seen.pdf", "seen")
    opened.remember(_add("lead:a", "first"), _add("lead:b", "second"), _add("lead:c", "third"))
    page = pages.new()
    path = f"/panel/notebooks/{opened.id}"
    _login(page, served, "alice", path)
    changed = page.locator("article.changed")
    expect(page.locator("article.record")).to_have_count(3)
    expect(changed).to_have_count(0)  # a first look: nothing to compare with
    page.goto(f"{served.url}/panel/notebooks")  # the owner looks elsewhere; the agent writes
    opened.remember(_replace("lead:a", "first, revised"))
    opened.remember(_add("lead:d", "fourth"))
    page.goto(served.url + path)
    expect(changed).to_have_count(2)
    expect(_record(page, "record-lead:a").locator(".changed-badge")).to_have_text("changed")
    expect(_record(page, "record-lead:d")).to_have_class(re.compile(r"\bchanged\b"))
    page.reload()
    expect(page.locator("article.record")).to_have_count(4)
    expect(changed).to_have_count(0)  # seen now
    # While the owner reads, a note the agent writes arrives marked, and the page says so.
    opened.remember(_add("lead:e", "fifth"))
    expect(_record(page, "record-lead:e")).to_have_class(re.compile(r"\bchanged\b"))
    expect(changed).to_have_count(1)
    expect(page.locator("#live")).to_have_text("Memory updated: version 4.")


def test_a_live_update_keeps_the_owners_place_and_says_so_where_the_owner_reads(
    served: World, pages: Any
) -> None:
    from playwright.sync_api import expect

    opened = _notebook(served, "place.pdf", "place")
    opened.remember(*[_add(f"lead:n-{i:02d}", f"note {i}") for i in range(40)])
    page = pages.new(viewport={"width": 900, "height": 700})
    _login(page, served, "alice", f"/panel/notebooks/{opened.id}")
    reading = _record(page, "record-lead:n-20")
    reading.scroll_into_view_if_needed()
    page.evaluate("window.scrollBy(0, document.getElementById('record-lead:n-20')"
                  ".getBoundingClientRect().top - 200)")  # fmt: skip
    top = page.evaluate("document.getElementById('record-lead:n-20').getBoundingClientRect().top")
    # The agent adds a note that sorts above the one being read, and replaces one below it.
    opened.remember(_add("lead:a-first", "lands above"), _replace("lead:n-30", "revised"))
    notice = page.locator("#updates")
    expect(notice).to_contain_text("Memory updated to version 2: 2 notes on this page changed.")
    expect(_record(page, "record-lead:a-first")).to_have_count(1)
    after = page.evaluate("document.getElementById('record-lead:n-20').getBoundingClientRect().top")
    assert abs(after - top) <= 2, (top, after)  # the note being read did not move
    box = notice.bounding_box()
    assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 700  # in view
    notice.get_by_role("link", name="Show the first").click()
    expect(page.locator(":target")).to_have_attribute("id", "record-lead:a-first")
    notice.get_by_role("button", name="Dismiss").click()
    expect(notice).to_have_count(0)
    # While the owner types, the page is not replaced: the notice offers the new memory.
    page.get_by_label("Search").fill("n-3")
    opened.remember(_add("lead:b-second", "while typing"))
    expect(notice).to_contain_text("The agent changed its memory while you were typing.")
    expect(page.get_by_label("Search")).to_have_value("n-3")
    expect(_record(page, "record-lead:b-second")).to_have_count(0)
    notice.get_by_role("button", name="Show the new memory").click()
    expect(_record(page, "record-lead:b-second")).to_have_count(1)


def test_the_panel_reads_well_on_a_narrow_screen(served: World, pages: Any) -> None:
    opened = _notebook(served, "narrow.pdf", "narrow")
    opened.remember(
        _add("lead:" + "x" * 100, "a-very-long-unbroken-word-" * 20, depends_on=["lead:other"])
    )
    page = pages.new(viewport={"width": 360, "height": 740})
    _login(page, served, "alice", f"/panel/notebooks/{opened.id}")
    for opened_too in (False, True):  # one line per record, then every record opened
        if opened_too:
            page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        overflow = page.evaluate(
            "document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        wide = page.evaluate(
            """[...document.querySelectorAll('body *')].filter(e =>
                e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
                .map(e => e.tagName + '.' + e.className)"""
        )
        assert overflow <= 0, wide


def test_hostile_note_text_renders_as_text(served: World, pages: Any) -> None:
    from playwright.sync_api import expect

    opened = _notebook(served, "hostile.pdf", "hostile")
    opened.remember(
        {
            "op": "add",
            "record": {
                "name": "note:hostile",
                "text": HOSTILE,
                "fields": {"html": "<b onmouseover=alert(1)>x</b>"},
                "supports": ["lead:x"],
            },
        }
    )
    page = pages.new()
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    _login(page, served, "alice", f"/panel/notebooks/{opened.id}")
    record = _record(page, "record-note:hostile")
    expect(record.locator(".body > .text")).to_have_text(HOSTILE)
    assert record.locator("img").count() == 0
    assert record.locator("script").count() == 0
    assert record.locator("b").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert dialogs == []


def test_a_proposed_note_accepted_on_the_review_page_is_reviewed_knowledge_in_a_new_notebook(
    served: World, pages: Any
) -> None:
    from playwright.sync_api import expect

    opened = _notebook(served, "hughes-2018.pdf", "review-1")
    opened.remember(
        _add("finding:bleaching-threshold", "bleaching starts near 1 °C above the summer mean"),
        _add("lead:guess", "maybe the 2014 dataset was revised"),
    )
    page = pages.new()
    _login(page, served, "alice", f"/panel/notebooks/{opened.id}")

    # Propose the finding, citing the passage and where it stands: its line opens, and the
    # form is a page of its own that comes back to the note, open.
    finding = _record(page, "record-finding:bleaching-threshold")
    finding.locator("summary").first.click()
    finding.get_by_role("link", name="Propose for review").click()
    expect(page.get_by_role("heading", name="Propose finding:bleaching-threshold")).to_be_visible()
    expect(page.get_by_label("Cited document")).to_have_value("hughes-2018.pdf")
    page.get_by_label("Exact passage").fill("Bleaching began at 1 °C above the mean.")
    page.get_by_label("Locator (page, section or offset)").fill("p. 4, §2")
    page.get_by_role("button", name="Propose for review").click()
    expect(page.locator(".notice.ok")).to_contain_text("Proposed finding:bleaching-threshold")
    expect(finding.locator(".proposal-state")).to_contain_text("pending")
    expect(finding.locator(".proposal-state")).to_be_visible()

    # And the guess, to be rejected.
    guess = _record(page, "record-lead:guess")
    guess.locator("summary").first.click()
    guess.get_by_role("link", name="Propose for review").click()
    page.get_by_label("Exact passage").fill("The series ends in 2014.")
    page.get_by_label("Locator (page, section or offset)").fill("table 2")
    page.get_by_role("button", name="Propose for review").click()
    expect(page.locator(".notice.ok")).to_contain_text("Proposed lead:guess")

    # The review page: both pending with the cited passages and locators.
    page.locator(".notice.ok").get_by_role("link", name="review page").click()
    expect(page.get_by_role("heading", name="Pending proposals (2)")).to_be_visible()
    pending = page.locator("#pending article")
    accepted = pending.filter(has_text="finding:bleaching-threshold")
    expect(accepted.locator("blockquote")).to_have_text("Bleaching began at 1 °C above the mean.")
    expect(accepted.locator("figcaption")).to_contain_text("hughes-2018.pdf, p. 4, §2")

    # Accept with an edit.
    accepted.get_by_label("Text to accept (edit it to accept with edits)").fill(
        "Bleaching starts near 1 °C above the summer mean (Hughes 2018)."
    )
    accepted.get_by_label("Reason for your decision").fill("matches the cited passage")
    accepted.get_by_role("button", name="Accept").click()
    expect(page.locator(".notice.ok")).to_contain_text("accepted with edits at revision 1")

    # Reject the guess with a reason.
    rejected = page.locator("#pending article").filter(has_text="lead:guess")
    rejected.get_by_label("Reason for your decision").fill("a guess, not a finding")
    rejected.get_by_role("button", name="Reject").click()
    expect(page.locator(".notice.ok")).to_contain_text("lead:guess: rejected")

    # History: who, when and why; knowledge by revision.
    expect(page.get_by_role("heading", name="Pending proposals (0)")).to_be_visible()
    decided = page.locator("#decided article")
    expect(decided).to_have_count(2)
    expect(decided.filter(has_text="finding:bleaching-threshold")).to_contain_text(
        "Accepted with edits by alice"
    )
    expect(decided.filter(has_text="finding:bleaching-threshold")).to_contain_text(
        "Reason: matches the cited passage"
    )
    expect(decided.filter(has_text="lead:guess")).to_contain_text("Rejected by alice")
    expect(decided.filter(has_text="lead:guess")).to_contain_text("a guess, not a finding")
    expect(page.locator("#knowledge article")).to_have_count(1)
    expect(page.locator("#knowledge article")).to_contain_text("revision 1")
    page.get_by_label("Show revision").fill("0")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#knowledge article")).to_have_count(0)

    # A new notebook pins the new revision: the finding is reviewed knowledge in view, and the
    # agent's disagreeing note of the same name is marked as a conflict on both sides.
    second = _notebook(served, "hughes-2018.pdf", "review-2")
    second.remember(
        _add("finding:bleaching-threshold", "bleaching starts at 2 °C"),
        _add("lead:counter", "a later paper disagrees", contradicts=["finding:other"]),
    )
    page.goto(f"{served.url}/panel/notebooks/{second.id}")
    pinned = page.locator("dl.session div").filter(has_text="Pinned revision").locator("dd")
    expect(pinned).to_have_text("1")
    reviewed = _record(page, "reviewed-finding:bleaching-threshold")
    expect(reviewed).to_be_visible()
    expect(reviewed.locator(".body > .text")).to_have_text(
        "Bleaching starts near 1 °C above the summer mean (Hughes 2018)."
    )
    expect(reviewed.locator("blockquote")).to_have_text("Bleaching began at 1 °C above the mean.")
    expect(reviewed.locator(".decision")).to_contain_text("accepted with edits by alice")
    note = _record(page, "record-finding:bleaching-threshold")
    for side in (note, reviewed):
        expect(side).to_have_class(re.compile(r"\bconflict\b"))
        expect(side.locator("summary .conflict-badge")).to_have_text("conflict")  # on its line
        expect(side.locator(".conflict-flag")).to_contain_text("In conflict")
    note.locator("summary").first.click()
    note.locator(".conflict-flag a").click()
    expect(page.locator(":target")).to_have_attribute("id", "reviewed-finding:bleaching-threshold")
    expect(reviewed.locator(".body")).to_be_visible()  # the record a link goes to opens
    # docs/panel.png: OH_PANEL_SCREENSHOT=docs/panel.png pytest tests/test_panel.py
    screenshot = os.environ.get("OH_PANEL_SCREENSHOT")
    if screenshot:
        page.set_viewport_size({"width": 960, "height": 900})
        page.goto(f"{served.url}/panel/notebooks/{second.id}")
        page.locator("details.entry").first.evaluate("d => d.open = true")
        page.locator("details.history").first.evaluate("d => d.open = true")
        page.screenshot(path=screenshot, full_page=True)

    # A card's record-<name> anchor, where only a reviewed record has that name, finds it.
    third = _notebook(served, "hughes-2018.pdf", "review-3")
    page.goto(f"{served.url}/panel/notebooks/{third.id}#record-finding:bleaching-threshold")
    page.wait_for_function("location.hash.startsWith('#reviewed-')")
    expect(_record(page, "reviewed-finding:bleaching-threshold")).to_be_in_viewport()
    # The proposed note shows its proposal's outcome.
    page.goto(f"{served.url}/panel/notebooks/{opened.id}")
    state = _record(page, "record-finding:bleaching-threshold").locator(".proposal-state")
    expect(state).to_contain_text("accepted")


def test_the_panel_updates_when_the_agent_writes(served: World, pages: Any) -> None:
    from playwright.sync_api import expect

    opened = _notebook(served, "live.pdf", "live")
    opened.remember(_add("lead:first", "first note"))
    page = pages.new()
    _login(page, served, "alice", f"/panel/notebooks/{opened.id}")
    expect(page.locator("#notes article")).to_have_count(1)
    opened.remember(_add("lead:second", "written while the owner watches"))
    expect(_record(page, "record-lead:second")).to_be_visible(timeout=12_000)
    expect(page.locator('[data-field="version"]')).to_have_text("2")
    expect(page.locator("#live")).to_have_text("Memory updated: version 2.")


@pytest.mark.skipif(
    not _events_accept_the_cookie(), reason="http.py does not use owner_from_request yet"
)
def test_the_event_stream_accepts_the_panel_session(served: World, pages: Any) -> None:
    opened = _notebook(served, "events.pdf", "events")
    page = pages.new()
    _login(page, served, "alice", f"/panel/notebooks/{opened.id}")
    status = page.evaluate(
        """async (url) => {
            const stop = new AbortController();
            const answer = await fetch(url, {signal: stop.signal});
            stop.abort();
            return answer.status;
        }""",
        f"/v1/notebooks/{opened.id}/events",
    )
    assert status == 200


def test_forget_now_asks_first_then_the_memory_is_gone(served: World, pages: Any) -> None:
    from playwright.sync_api import expect

    opened = _notebook(served, "forget.pdf", "forget")
    opened.remember(_add("lead:private", "a private note"), _add("lead:other", "another"))
    page = pages.new()
    path = f"/panel/notebooks/{opened.id}"
    _login(page, served, "alice", path)

    page.get_by_role("button", name="Forget now").click()
    expect(page.get_by_role("heading", name="Forget this session's memory now?")).to_be_visible()
    page.get_by_role("link", name="Cancel, keep it").click()
    expect(page.locator("#notes article")).to_have_count(2)

    page.get_by_role("button", name="Forget now").click()
    page.get_by_role("button", name="Yes, forget now").click()
    page.wait_for_url(served.url + path)
    expect(page.locator(".notice.gone")).to_contain_text("This session's memory is gone")
    expect(page.locator("#notes .empty")).to_have_text("No working notes.")
    expect(page.locator("#reviewed .empty")).to_have_text("No reviewed knowledge in view.")
    expect(page.locator("article")).to_have_count(0)
    expect(page.get_by_role("button", name="Forget now")).to_have_count(0)
    expect(page.locator('[data-field="state"]')).to_have_text("purged")
    assert "a private note" not in page.content()
    late = opened.agent.post(f"/v1/notebooks/{opened.id}/tools/read", json={"name": "lead:other"})
    assert late.status_code == 410
    assert late.json()["error"]["code"] == "purged"


def test_another_owner_in_the_browser_gets_not_found(served: World, pages: Any) -> None:
    from playwright.sync_api import expect

    opened = _notebook(served, "alice-only.pdf", "private")
    opened.remember(_add("lead:alice-secret", "ALICE-SECRET-TEXT"))
    page = pages.new()
    _login(page, served, "bob", "/panel/review")
    answer = page.goto(f"{served.url}/panel/notebooks/{opened.id}")
    assert answer is not None and answer.status == 404
    expect(page.locator("code.code")).to_have_text("not_found")
    assert "ALICE-SECRET-TEXT" not in page.content()
    assert "alice-only.pdf" not in page.content()
    page.goto(f"{served.url}/panel/review")
    assert "finding:bleaching-threshold" not in page.content()
    logout = page.get_by_role("button", name="Log out")
    logout.click()
    page.wait_for_url(re.compile(r"/panel/login"))
    answer = page.goto(f"{served.url}/panel/review")
    assert "/panel/login" in page.url


# -- review in the browser, as its own owner (alice's counts above stay as they are) ----------


def _carol(world: World, document: str, run: str) -> tuple[Opened, httpx.Client]:
    """A notebook of carol's (an owner only these tests use) and carol's API client."""
    if "carol" not in world.tokens:
        world.tokens["carol"] = world.host.create_owner_token("carol")
    owner = world.owner("carol")
    return world.open(owner, document, run, httpx.Client(base_url=world.url, timeout=10)), owner


def _propose(owner: httpx.Client, notebook: str, name: str) -> str:
    answer = owner.post(
        "/v1/knowledge/proposals", json={"notebook": notebook, "name": name, "source": SOURCE}
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["proposal_id"])


def test_accepting_with_the_text_box_cleared_is_refused_and_changes_nothing(
    served: World, pages: Any
) -> None:
    from playwright.sync_api import expect

    opened, owner = _carol(served, "cleared.pdf", "cleared")
    opened.remember(_add("finding:cleared", "recovery took ten years"))
    proposal_id = _propose(owner, opened.id, "finding:cleared")
    revision = served.host._review.store.latest_revision("carol")
    page = pages.new()
    _login(page, served, "carol", "/panel/review")
    for cleared in ("", "   \n "):
        article = page.locator(f'[id="proposal-{proposal_id}"]')
        article.get_by_label("Text to accept (edit it to accept with edits)").fill(cleared)
        article.get_by_label("Reason for your decision").fill("cleared by mistake")
        with page.expect_navigation():
            article.get_by_role("button", name="Accept").click()
        expect(page.locator("code.code")).to_have_text("invalid_argument")
        expect(page.locator("section.error")).to_contain_text("reviewed knowledge needs text")
        assert served.host._review.store.proposal(proposal_id).state == "pending"
        assert served.host._review.store.latest_revision("carol") == revision
        page.goto(f"{served.url}/panel/review")


def test_the_decided_list_shows_the_accepted_text_and_what_an_edit_changed(
    served: World, pages: Any
) -> None:
    from playwright.sync_api import expect

    opened, owner = _carol(served, "decided.pdf", "decided")
    opened.remember(
        _add("finding:as-is", "recovery took ten years"),
        _add("finding:edited", "bleaching near 1 °C"),
        _add("lead:rejected", "maybe the series was revised"),
    )
    ids = {
        name: _propose(owner, opened.id, name)
        for name in ("finding:as-is", "finding:edited", "lead:rejected")
    }
    page = pages.new()
    _login(page, served, "carol", "/panel/review")

    def decide(name: str, button: str, text: str | None = None) -> None:
        article = page.locator(f'[id="proposal-{ids[name]}"]')
        if text is not None:
            article.get_by_label("Text to accept (edit it to accept with edits)").fill(text)
        article.get_by_label("Reason for your decision").fill(f"{button} {name}")
        with page.expect_navigation():
            article.get_by_role("button", name=button).click()

    decide("finding:as-is", "Accept")
    decide("finding:edited", "Accept", "Bleaching starts near 1 °C above the summer mean.")
    decide("lead:rejected", "Reject")

    def decided(name: str) -> Any:
        return page.locator(f'#decided [id="proposal-{ids[name]}"]')

    as_is = decided("finding:as-is")
    expect(as_is.locator(".accepted-record .text")).to_have_text("recovery took ten years")
    expect(as_is.locator(".decision")).to_contain_text("Accepted by carol")
    expect(as_is.locator(".decision")).to_contain_text("Reason: Accept finding:as-is")
    expect(as_is.locator(".edits")).to_have_count(0)

    edited = decided("finding:edited")
    expect(edited.locator(".accepted-record .text")).to_have_text(
        "Bleaching starts near 1 °C above the summer mean."
    )
    expect(edited.locator(".decision")).to_contain_text("Accepted with edits by carol")
    change = edited.locator("dl.edits")
    expect(change.locator("dt")).to_have_text(["text"])
    expect(change.locator(".was .text")).to_have_text("bleaching near 1 °C")
    expect(change.locator(".now .text")).to_have_text(
        "Bleaching starts near 1 °C above the summer mean."
    )

    rejected = decided("lead:rejected")
    # A rejection keeps the decision, not the text (docs/design.md, "Proposals of a forgotten
    # notebook"): the page says so, and the text is nowhere on it.
    expect(rejected.locator(".proposed-record")).to_have_count(0)
    expect(rejected).to_contain_text("The proposed text was discarded when it was rejected")
    expect(rejected).not_to_contain_text("maybe the series was revised")
    expect(rejected.locator(".decision")).to_contain_text("Rejected by carol")
    expect(rejected.locator(".accepted-record")).to_have_count(0)


# The contrast of an element's text against what is behind it, as WCAG 2 defines it: the text
# colour and every background from the element out to the first opaque one (or the canvas)
# composited by their alpha, then (L1 + 0.05) / (L2 + 0.05) of the relative luminances.
CONTRAST = """
() => {
  const parse = (text) => {
    const found = text.match(/rgba?\\(([^)]+)\\)/);
    if (!found) throw new Error("unexpected colour " + text);
    const parts = found[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [parts[0], parts[1], parts[2], parts.length > 3 ? parts[3] : 1];
  };
  const over = (top, bottom) => {
    const alpha = top[3] + bottom[3] * (1 - top[3]);
    const mix = (i) => (top[i] * top[3] + bottom[i] * bottom[3] * (1 - top[3])) / alpha;
    return [mix(0), mix(1), mix(2), alpha];
  };
  const probe = document.createElement("div");
  probe.style.backgroundColor = "Canvas";
  document.body.append(probe);
  const canvas = parse(getComputedStyle(probe).backgroundColor);
  probe.remove();
  const behind = (element) => {
    const layers = [];
    for (let at = element; at; at = at.parentElement) {
      const colour = parse(getComputedStyle(at).backgroundColor);
      if (colour[3] > 0) layers.push(colour);
      if (colour[3] >= 1) break;
    }
    return layers.reverse().reduce((below, layer) => over(layer, below), canvas);
  };
  const luminance = (rgb) => {
    const channel = (value) => {
      const c = value / 255;
      return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4);
    };
    return 0.2126 * channel(rgb[0]) + 0.7152 * channel(rgb[1]) + 0.0722 * channel(rgb[2]);
  };
  const shown = (element) => {
    const box = element.getBoundingClientRect();
    const style = getComputedStyle(element);
    return box.width > 0 && box.height > 0 && box.right > 0 && box.bottom > 0
      && style.visibility === "visible" && element.textContent.trim() !== "";
  };
  return [...document.querySelectorAll("a, button")].filter(shown).map((element) => {
    const background = behind(element);
    const text = over(parse(getComputedStyle(element).color), background);
    const [light, dark] = [luminance(text), luminance(background)].sort((a, b) => b - a);
    return {
      text: element.textContent.trim().slice(0, 40),
      ratio: Math.round(((light + 0.05) / (dark + 0.05)) * 100) / 100,
      colour: getComputedStyle(element).color,
      background: "rgb(" + background.slice(0, 3).map(Math.round).join(", ") + ")",
    };
  });
}
"""


def _every_page(served: World, tag: str) -> tuple[str, list[tuple[str, str]]]:
    """carol's notebooks with a bit of everything the panel draws (notes, a conflict, links,
    reviewed knowledge, a pending and a decided proposal, a removed note, an older pin, more
    than one page), and every page the panel has over them: (the panel's URL to sign in to,
    [(name, URL)] of the pages after signing in)."""
    opened, owner = _carol(served, f"{tag}.pdf", tag)
    reviewed, pending = f"finding:reviewed-{tag}", f"lead:pending-{tag}"
    second = f"lead:second-{tag}"  # two pending proposals: the form to decide several
    opened.remember(
        _add(reviewed, "reviewed text"), _add(pending, "to decide"), _add(second, "and this")
    )
    many = [_add(f"lead:note-{tag}-{i:03d}", f"note {i}") for i in range(101)]
    opened.remember(*many[:64])
    opened.remember(*many[64:], _add(f"lead:note-{tag}-gone", "removed next"))
    opened.remember({"op": "remove", "name": f"lead:note-{tag}-gone"})
    served.host._review.decide(
        "carol", _propose(owner, opened.id, reviewed), decision="accept", reason="checked"
    )
    proposed = _propose(owner, opened.id, pending)
    _propose(owner, opened.id, second)
    pinned, _ = _carol(served, f"{tag}.pdf", f"{tag}-pinned")
    pinned.remember(  # a conflict (its own background), links, and a note to propose
        _add(reviewed, "disagrees", supports=[pending]),
        _add(pending, "a link target", contradicts=[reviewed]),
        _add(f"lead:other-{tag}", "can be proposed"),
    )
    panel = f"{served.url}/panel/notebooks/{pinned.id}"
    return f"/panel/notebooks/{pinned.id}", [
        ("panel", f"{panel}?proposed={proposed}"),
        ("filtered", f"{served.url}/panel/notebooks/{opened.id}?q=note&page=2"),
        ("forget", f"{panel}/forget"),
        ("forget-note", f"{panel}/notes/forget?name=lead:other-{tag}"),
        ("propose", f"{panel}/propose?name=lead:other-{tag}"),
        ("history", f"{panel}/history?name={pending}"),
        ("review", f"{served.url}/panel/review"),
        ("notebooks", f"{served.url}/panel/notebooks"),
        ("document", f"{served.url}/panel/notebooks?document={tag}.pdf"),
        ("missing", f"{served.url}/panel/notebooks/nb_{'0' * 32}"),
    ]


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_button_and_link_meets_wcag_aa_contrast_in_both_colour_schemes(
    served: World, pages: Any, scheme: str
) -> None:
    """4.5:1 for every visible button and link, filled or outlined, on the login page, the
    Memory panel (notes, a conflict, reviewed knowledge, a notice; and, filtered, a pager,
    removed notes and the notice of an older pin), the forget confirmation, the review page
    (pending and decided proposals), the landing page and the not-found page."""
    start, urls = _every_page(served, f"contrast-{scheme}")
    page = pages.new()
    page.emulate_media(color_scheme=scheme)
    page.goto(f"{served.url}/panel/login")
    measured = {"login": page.evaluate(CONTRAST)}
    _login(page, served, "carol", start)
    for name, url in urls:
        page.goto(url)
        page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        measured[name] = page.evaluate(CONTRAST)
    assert page.evaluate("matchMedia('(prefers-color-scheme: dark)').matches") is (scheme == "dark")
    for name, expected in (
        ("panel", {"Forget now", "Propose for review", "Log out", "Working notes (3)"}),
        ("filtered", {"Filter", "Clear the filter", "First", "Previous", "Forget this note"}),
        ("forget-note", {"Yes, forget this note", "Cancel, keep it", "Back to the memory"}),
        ("propose", {"Propose for review", "Back to the memory"}),
        ("history", {"Back to the memory"}),
        ("notebooks", {f"contrast-{scheme}", "Notebooks"}),
        ("missing", {"Your documents and notebooks"}),
    ):
        # A control's text, or its first words (a name for screen readers may follow).
        texts = {item["text"] for item in measured[name]}
        found = {e for e in expected if any(t == e or t.startswith(e + " ") for t in texts)}
        assert found == expected, measured[name]
    assert any(item["text"].startswith("revision ") for item in measured["filtered"])  # the pin
    assert {"Accept", "Reject", "Show", "Accept the selected"} <= {
        item["text"] for item in measured["review"]
    }
    failing = [
        {"page": name, **item}
        for name, items in measured.items()
        for item in items
        if item["ratio"] < 4.5
    ]
    assert failing == [], failing


AXE = Path(__file__).resolve().parents[1] / ".cache" / "axe-core" / "axe.min.js"
WCAG22_AA = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa"]


@pytest.mark.parametrize(
    ("scheme", "width"), [("light", 1280), ("dark", 1280), ("light", 390), ("dark", 390)]
)
def test_axe_finds_no_wcag_2_2_aa_violation_on_any_page(
    served: World, pages: Any, scheme: str, width: int
) -> None:
    """axe-core (scripts/install-axe puts it in .cache) in Chromium, on every page of the panel
    with everything on it opened, in both colour schemes, at a desktop and a phone width."""
    if not AXE.is_file():
        pytest.fail(f"{AXE} is missing: scripts/install-axe fetches it (scripts/test runs it)")
    start, urls = _every_page(served, f"axe-{scheme}-{width}")
    # The pages' CSP refuses inline scripts, axe's included: this context lets the test's in.
    page = pages.new(viewport={"width": width, "height": 900}, bypass_csp=True)
    page.emulate_media(color_scheme=scheme)
    options = {
        "runOnly": {"type": "tag", "values": WCAG22_AA},
        # An experimental rule axe leaves out by default: a control's accessible name holds
        # the words it shows (WCAG 2.5.3, Label in Name).
        "rules": {"label-content-name-mismatch": {"enabled": True}},
        "resultTypes": ["violations"],
    }

    def check() -> list[dict[str, Any]]:
        page.add_script_tag(content=AXE.read_text())
        found = page.evaluate("(options) => axe.run(document, options)", options)
        return [
            {"rule": v["id"], "nodes": [n["target"] for n in v["nodes"]][:5], "help": v["help"]}
            for v in found["violations"]
        ]

    page.goto(f"{served.url}/panel/login")
    violations = {"login": check()}
    # The check can fail: a button whose name hides its words, and a tiny target, are found.
    page.evaluate(
        """document.querySelector('main').insertAdjacentHTML('beforeend',
            '<button aria-label="Remove">Forget this note</button>'
            + '<a href="#x" style="display:inline-block;width:8px;font-size:4px">x</a>'
            + '<a href="#y" style="display:inline-block;width:8px;font-size:4px">y</a>')"""
    )
    assert {"label-content-name-mismatch", "target-size"} <= {v["rule"] for v in check()}
    _login(page, served, "carol", start)
    for name, url in urls:
        page.goto(url)
        violations[name] = check()
        page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
        violations[f"{name}, opened"] = check()
    assert {name: found for name, found in violations.items() if found} == {}


def _many_proposals(world: World, count: int) -> tuple[TestClient, list[str], list[str]]:
    """alice's ``count`` notes, each proposed for review; her signed-in panel client, the
    proposals' ids in the order the review page lists them, and their names."""
    opened = _alice_notebook(world)
    names = [f"finding:item-{i:03d}" for i in range(count)]
    for start in range(0, count, 50):
        opened.remember(*[_add(name, f"text of {name}") for name in names[start : start + 50]])
    owner = world.owner("alice", _client(world))
    for name in names:
        answer = owner.post(
            "/v1/knowledge/proposals", json={"notebook": opened.id, "name": name, "source": SOURCE}
        )
        assert answer.status_code == 201, answer.text
    ids = [p.id for p in world.host.proposals("alice") if p.state == "pending"]
    listed = [world.host.proposal("alice", i).name for i in ids]
    return _sign_in(_client(world), world.tokens["alice"]), ids, listed


def test_review_at_volume_decides_several_at_once_keeps_the_next_in_view_and_pages_decided(
    world: World,
) -> None:
    client, ids, names = _many_proposals(world, 60)
    page = client.get("/panel/review").text
    assert "Pending proposals (60)" in page
    assert page.count('form="bulk" name="proposal"') == 60 and 'id="bulk"' in page
    csrf = CSRF.search(page)
    assert csrf is not None
    token = csrf.group(1)

    def decide_several(chosen: list[str], decision: str, reason: str) -> Any:
        body = [("csrf", token), ("decision", decision), ("reason", reason)]
        body += [("proposal", proposal) for proposal in chosen]
        return client.post(
            "/panel/review/decisions",
            content=urlencode(body),
            headers={"content-type": "application/x-www-form-urlencoded"},
        )

    # One decision: the page opens at the proposal that followed it.
    one = client.post(
        f"/panel/review/{ids[3]}/decision",
        data={"csrf": token, "decision": "reject", "reason": "not yet"},
    )
    assert one.status_code == 303
    assert one.headers["location"] == f"/panel/review?decided={ids[3]}#proposal-{ids[4]}"
    notice = client.get(one.headers["location"]).text
    assert 'class="notice ok floating"' in notice and "The next proposal is here." in notice
    # Several with one reason: each accepted as proposed, the page at the next one.
    answer = decide_several(ids[5:8], "accept", "batch checked")
    assert answer.status_code == 303, answer.text
    assert answer.headers["location"] == (
        f"/panel/review?decided={ids[5]}&count=3#proposal-{ids[8]}"
    )
    assert (
        f"{names[5]}</strong>: accepted at revision 1 and 2 more, accepted."
        in client.get(answer.headers["location"]).text
    )
    for proposal_id in ids[5:8]:
        decided = world.host.proposal("alice", proposal_id)
        assert decided.state == "accepted" and decided.decision is not None
        assert decided.decision.reason == "batch checked"
    assert world.host.latest_revision("alice") == 3
    # Refused as a whole, nothing changed: one of them decided already, no reason, no choice,
    # the same one twice, a decision that is neither.
    for chosen, decision, reason in (
        ([ids[9], ids[3]], "accept", "again"),
        ([ids[9], ids[10]], "reject", "  "),
        ([], "accept", "nothing ticked"),
        ([ids[9], ids[9]], "reject", "twice"),
        ([ids[9]], "accept_with_edits", "edits"),
    ):
        refused = decide_several(chosen, decision, reason)
        assert refused.status_code == 400, (chosen, decision, refused.text)
        assert '<code class="code">invalid_argument</code>' in refused.text
    assert world.host.proposal("alice", ids[9]).state == "pending"
    assert world.host.proposal("alice", ids[10]).state == "pending"
    # Another owner's proposal cannot be ticked into alice's decision.
    assert decide_several([ids[9], "pr_" + "0" * 32], "reject", "x").status_code == 404
    assert world.host.proposal("alice", ids[9]).state == "pending"
    # Decided is paged, the latest decision first.
    assert decide_several(ids[9:59], "reject", "bulk").status_code == 303  # 54 decided now
    first = client.get("/panel/review").text
    assert "Decided (54)" in first and "Showing 1–50 of 54, the latest decision first." in first
    assert 'href="/panel/review?decided_page=2#decided" rel="next">Older</a>' in first
    second = client.get("/panel/review", params={"decided_page": "2"}).text
    assert "Showing 51–54 of 54" in second
    assert f"{names[3]}" in second  # the first decision is on the last page
    for bad in ("0", "x", "1.5"):
        assert client.get("/panel/review", params={"decided_page": bad}).status_code == 400
    assert "Pending proposals (6)" in second


def test_in_the_browser_the_owner_decides_several_proposals_and_stays_at_the_next(
    tmp_path: Path, pages: Any
) -> None:
    from playwright.sync_api import expect

    world = World(tmp_path / "bulk", f"http://127.0.0.1:{free_port()}")
    _, ids, names = _many_proposals(world, 12)
    port = int(world.url.rsplit(":", 1)[1])
    with in_thread(world.app, port):
        page = pages.new(viewport={"width": 1000, "height": 800})
        _login(page, world, "alice", "/panel/review")
        # Far down the list, the form to decide several stays in view while ticking.
        for proposal_id in ids[6:8]:
            page.locator(f'[id="proposal-{proposal_id}-pick"]').check()
        bulk = page.get_by_role("form", name="Decide the selected proposals")
        assert bulk.bounding_box() is not None
        bulk.get_by_label("Reason for the selected").fill("both match their passages")
        bulk.get_by_role("button", name="Accept the selected").click()
        expect(page.locator(":target")).to_have_attribute("id", f"proposal-{ids[8]}")
        notice = page.locator(".notice.floating")
        expect(notice).to_contain_text(f"{names[6]}: accepted at revision 1 and 1 more")
        box = notice.bounding_box()
        assert box is not None and box["y"] >= 0 and box["y"] + box["height"] <= 800
        expect(page.get_by_role("heading", name="Pending proposals (10)")).to_be_visible()
        notice.get_by_role("button", name="Dismiss").click()
        expect(notice).to_have_count(0)
    assert world.host.latest_revision("alice") == 2


SCREENS = {"light": ("light", 1100, 800), "dark": ("dark", 1100, 800), "phone": ("light", 390, 844)}
SCREEN_PAGES = (
    "login",
    "notebooks",
    "document",
    "panel",
    "history",
    "propose",
    "forget-note",
    "forget",
    "review",
)


def test_screenshots_of_every_page_in_light_dark_and_phone_width(
    served: World, pages: Any, tmp_path: Path
) -> None:
    """docs/panel.md shows every page in the light and dark schemes and at a phone's width.
    ``OH_PANEL_SCREENSHOTS=docs/panel`` writes them there; otherwise they go to a temporary
    directory, so that the pages are drawn in every scheme on every run."""
    folder = Path(os.environ.get("OH_PANEL_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    start, urls = _every_page(served, "screens")
    where = dict(urls)
    for variant, (scheme, width, height) in SCREENS.items():
        page = pages.new(viewport={"width": width, "height": height})
        page.emulate_media(color_scheme=scheme)
        page.goto(f"{served.url}/panel/login")
        page.screenshot(path=str(folder / f"login-{variant}.png"))
        _login(page, served, "carol", start)
        for name in SCREEN_PAGES[1:]:
            page.goto(where[name])
            if name == "panel":  # a record opened, with its history, as an owner reads one
                page.locator("details.entry").first.evaluate("d => d.open = true")
                page.locator("details.history").first.evaluate("d => d.open = true")
                page.locator("details.history li").first.wait_for()
            page.screenshot(path=str(folder / f"{name}-{variant}.png"))
    shots = sorted(path.name for path in folder.glob("*.png"))
    assert shots == sorted(f"{n}-{v}.png" for n in SCREEN_PAGES for v in SCREENS)
    assert all((folder / shot).stat().st_size > 5_000 for shot in shots)
    page_text = (Path(__file__).resolve().parents[1] / "docs" / "panel.md").read_text()
    for shot in shots:
        assert f"(panel/{shot})" in page_text, shot  # docs/panel.md shows each of them


# -- the way in: the owner's notebooks ---------------------------------------------------------


def test_the_landing_page_lists_the_owners_documents_and_their_notebooks(tmp_path: Path) -> None:
    clock = FakeClock()
    world = World(tmp_path, clock=clock)
    client = _client(world)
    # Not signed in: / leads to the list, the list to the sign-in form, which comes back to it.
    assert client.get("/").headers["location"] == "/panel/notebooks"
    answer = client.get("/panel/notebooks")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/panel/login?next=/panel/notebooks"
    owner = world.owner("alice", _client(world))
    reef = world.open(owner, "reef.pdf", "run-1", _client(world))
    clock.advance(hours=1)
    kelp = world.open(owner, "kelp.pdf", "run-2", _client(world))
    clock.advance(hours=1)
    gone = world.open(owner, "reef.pdf", "run-3", _client(world))
    owner.delete(f"/v1/notebooks/{gone.id}")
    assert owner.put("/v1/documents/atoll.pdf").status_code == 201  # no notebook yet
    bobs = world.open(world.owner("bob", _client(world)), "bob.pdf", "run-1", _client(world))
    clock.advance(hours=22, minutes=30)  # run-1 is past its forget time: expired
    _sign_in(client, world.tokens["alice"], "/panel/notebooks")
    page = client.get("/panel/notebooks")
    assert page.status_code == 200
    text = page.text
    # Documents by name, the one without a notebook too; each document's runs newest first.
    assert (
        text.index("<h2>atoll.pdf</h2>")
        < text.index("<h2>kelp.pdf</h2>")
        < text.index("<h2>reef.pdf</h2>")
    )
    atoll = text[text.index("<h2>atoll.pdf</h2>") : text.index("<h2>kelp.pdf</h2>")]
    assert "No notebook yet" in atoll and "--document atoll.pdf" in atoll
    assert "<table>" not in atoll
    assert text.index(f"/panel/notebooks/{gone.id}") < text.index(f"/panel/notebooks/{reef.id}")
    assert f'href="/panel/notebooks/{kelp.id}">run-2</a>' in text
    assert "forgotten" in text and "expired, waiting for the purge" in text
    assert 'class="notebook open"' in text  # kelp's run-2 has half an hour left
    assert "Registered <time" in text
    assert bobs.id not in text and "bob.pdf" not in text
    assert client.get(f"/panel/notebooks/{reef.id}").status_code == 200  # the link works
    assert 'href="/panel/notebooks">Notebooks</a>' in text  # and the header leads back
    # Bob, signed in, sees only his own.
    theirs = _sign_in(_client(world), world.tokens["bob"]).get("/panel/notebooks").text
    assert bobs.id in theirs and reef.id not in theirs and "reef.pdf" not in theirs
    # An owner with nothing yet is told how to start.
    world.tokens["carol"] = world.host.create_owner_token("carol")
    empty = _sign_in(_client(world), world.tokens["carol"]).get("/panel/notebooks").text
    assert "No documents yet" in empty and "oh notebook open" in empty
    world.host.close()


def test_the_landing_page_pages_its_documents_and_each_document_its_notebooks(
    tmp_path: Path,
) -> None:
    clock = FakeClock()
    world = World(tmp_path, clock=clock)
    owner = world.owner("alice", _client(world))
    owner.put("/v1/documents/big.pdf")
    for i in range(NOTEBOOKS_PAGE_SIZE + 2):
        clock.advance(seconds=1)
        answer = owner.post("/v1/documents/big.pdf/notebooks", json={"run": f"run-{i:03d}"})
        assert answer.status_code == 201
    for i in range(DOCUMENTS_PAGE_SIZE):
        assert owner.put(f"/v1/documents/doc-{i:03d}.pdf").status_code == 201
    client = _sign_in(_client(world), world.tokens["alice"])
    first = client.get("/panel/notebooks").text
    # big.pdf sorts first: its newest runs, and a link to all of them.
    assert first.count('<tr class="notebook') == NOTEBOOKS_SHOWN
    assert f"run-{NOTEBOOKS_PAGE_SIZE + 1:03d}" in first and ">run-000</a>" not in first
    assert first.count('<section class="document"') == DOCUMENTS_PAGE_SIZE
    assert "doc-048.pdf" in first and "doc-049.pdf" not in first
    more = re.search(r'href="(/panel/notebooks\?cursor=[^"]+)">More documents', first)
    assert more is not None
    rest = client.get(html.unescape(more.group(1))).text
    assert rest.count('<section class="document"') == 1 and "doc-049.pdf" in rest
    assert "More documents" not in rest
    every = re.search(
        r'href="(/panel/notebooks\?document=big.pdf)">All notebooks of big.pdf', first
    )
    assert every is not None
    own = client.get(every.group(1)).text
    assert own.count('<tr class="notebook') == NOTEBOOKS_PAGE_SIZE
    assert f"Showing 1–{NOTEBOOKS_PAGE_SIZE} of {NOTEBOOKS_PAGE_SIZE + 2} notebooks." in own
    older = re.search(r'href="(/panel/notebooks\?document=big.pdf&amp;page=2)" rel="next"', own)
    assert older is not None
    second = client.get(html.unescape(older.group(1))).text
    assert second.count('<tr class="notebook') == 2 and 'rel="next"' not in second
    assert ">run-000</a>" in second and ">run-001</a>" in second
    assert client.get("/panel/notebooks?cursor=forged!").status_code == 400
    for bad in ({"page": "0"}, {"state": "gone"}, {"order": "x"}, {"q": "x" * 121}):
        answer = client.get("/panel/notebooks", params={"document": "big.pdf", **bad})
        assert answer.status_code == 400, bad
    world.host.close()


def test_a_documents_notebooks_are_found_by_run_and_state_with_notes_and_last_write(
    tmp_path: Path,
) -> None:
    """The busy notebook is found: every notebook of a document, searched by run, filtered by
    state, ordered by its last write, each with its notes, last write and real end."""
    clock = FakeClock()
    world = World(tmp_path, clock=clock)
    owner = world.owner("alice", _client(world))
    runs = {}
    for i in range(150):
        clock.advance(seconds=10)
        runs[i] = world.open(owner, "many.pdf", f"run-{i:03d}", _client(world))
    busy = runs[3]  # an old notebook the agent keeps writing to
    clock.advance(minutes=5)
    busy.remember(*[_add(f"lead:n-{i}", "busy") for i in range(12)])
    gone = runs[149]
    owner.delete(f"/v1/notebooks/{gone.id}")
    client = _sign_in(_client(world), world.tokens["alice"])
    landing = client.get("/panel/notebooks").text
    assert landing.count('<tr class="notebook') == NOTEBOOKS_SHOWN  # the five newest
    assert f"/panel/notebooks/{busy.id}" not in landing
    # Ordered by the last write, the busy one comes first, with its notes and when.
    active = client.get("/panel/notebooks", params={"document": "many.pdf", "order": "active"}).text
    first_row = active[active.index('<tr class="notebook') :].split("</tr>", 1)[0]
    assert f"/panel/notebooks/{busy.id}" in first_row
    assert '<td class="number">12</td>' in first_row
    assert "not yet" in active  # the others were never written
    # Found by a part of its run id.
    found = client.get("/panel/notebooks", params={"document": "many.pdf", "q": "RUN-003"}).text
    assert found.count('<tr class="notebook') == 1 and f"/{busy.id}" in found
    assert "Showing 1–1 of 1 notebooks." in found
    # Forgotten ones, with when.
    forgotten = client.get(
        "/panel/notebooks", params={"document": "many.pdf", "state": "forgotten"}
    ).text
    assert forgotten.count('<tr class="notebook') == 1 and gone.id in forgotten
    assert "forgotten <time" in forgotten
    # Open and expired: a day later every notebook is expired, and says since when.
    open_now = client.get("/panel/notebooks", params={"document": "many.pdf", "state": "open"})
    assert open_now.text.count('<tr class="notebook') == NOTEBOOKS_PAGE_SIZE
    clock.advance(hours=25)
    client = _sign_in(_client(world), world.tokens["alice"])  # a panel session lasts less
    expired = client.get(
        "/panel/notebooks", params={"document": "many.pdf", "state": "expired", "page": "2"}
    ).text
    assert "Showing 101–149 of 149 notebooks." in expired and "expired <time" in expired
    assert (
        client.get("/panel/notebooks", params={"document": "many.pdf", "state": "open"}).text.count(
            '<tr class="notebook'
        )
        == 0
    )
    world.host.close()


def test_in_the_browser_the_owner_goes_from_the_front_door_to_a_notebooks_panel(
    served: World, pages: Any
) -> None:
    from playwright.sync_api import expect

    opened = _notebook(served, "front-door.pdf", "run-front")
    opened.remember(_add("lead:front-door", "seen from the landing page"))
    page = pages.new()
    page.goto(served.url + "/")
    assert "/panel/login" in page.url  # not signed in: the sign-in form first
    page.get_by_label("Owner token").fill(served.tokens["alice"])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(served.url + "/panel/notebooks")
    expect(page.get_by_role("heading", name="Your documents and notebooks")).to_be_visible()
    section = page.get_by_role("region", name="Document front-door.pdf")
    expect(section.get_by_role("cell", name="open")).to_be_visible()
    section.get_by_role("link", name="run-front").click()
    page.wait_for_url(f"{served.url}/panel/notebooks/{opened.id}")
    expect(_record(page, "record-lead:front-door")).to_be_visible()
    page.get_by_role("link", name="Notebooks").click()
    page.wait_for_url(served.url + "/panel/notebooks")


def test_in_the_browser_the_owner_forgets_one_note_and_keeps_the_rest(
    served: World, pages: Any
) -> None:
    from playwright.sync_api import expect

    opened = _notebook(served, "forget-one.pdf", "run-forget")
    opened.remember(_add("lead:keep-me", "still useful"), _add("lead:drop-me", "a wrong guess"))
    page = pages.new()
    _login(page, served, "alice", f"/panel/notebooks/{opened.id}")
    expect(_record(page, "record-lead:drop-me")).to_be_visible()
    # A secondary control, in the note's opened part: it asks first, and Cancel changes nothing.
    _record(page, "record-lead:drop-me").locator("summary").first.click()
    page.get_by_role("link", name="Forget this note lead:drop-me").click()
    expect(page.get_by_role("heading", name="Forget the note lead:drop-me?")).to_be_visible()
    page.get_by_role("link", name="Cancel, keep it").click()
    expect(page.locator(":target")).to_have_attribute("id", "record-lead:drop-me")
    _record(page, "record-lead:drop-me").get_by_role("link", name="Forget this note").click()
    page.get_by_role("button", name="Yes, forget this note").click()
    # Back where the owner was (the next note, here the one before it), with what happened.
    page.wait_for_url(re.compile(r".*forgot=lead%3Adrop-me#record-lead:keep-me$"))
    expect(page.locator(".notice.ok")).to_contain_text(
        "Forgot the note lead:drop-me: the agent no longer sees it."
    )
    expect(_record(page, "record-lead:drop-me")).to_have_count(0)
    expect(_record(page, "record-lead:keep-me")).to_be_visible()
    # The agent sees the owner's change as a write: its old version is stale now.
    stale = opened.agent.post(
        f"/v1/notebooks/{opened.id}/tools/remember",
        json={"based_on": opened.version, "request_id": "after", "changes": [_add("lead:x", "x")]},
    ).json()
    assert stale["status"] == "refused" and stale["current_version"] == opened.version + 1


def test_a_notebook_past_its_forget_time_shows_no_note_and_its_real_state(tmp_path: Path) -> None:
    """Expired (the purge has not run yet) or forgotten: the page never shows a note, and it
    says when the notebook expired or was forgotten, never a forget time still to come."""
    clock = FakeClock()
    world = World(tmp_path, clock=clock)
    owner = world.owner("alice", _client(world))
    expiring = world.open(owner, "reef.pdf", "run-1", _client(world))
    expiring.remember(_add("finding:status", "zexpiredtext positive"))
    forgotten = world.open(owner, "reef.pdf", "run-2", _client(world))
    forgotten.remember(_add("finding:other", "zforgottentext"))
    assert owner.delete(f"/v1/notebooks/{forgotten.id}").status_code == 200
    client = _sign_in(_client(world), world.tokens["alice"])
    assert "zexpiredtext" in client.get(f"/panel/notebooks/{expiring.id}").text
    clock.advance(hours=25)  # run-1 is past its forget time; nobody has purged it yet
    client = _sign_in(_client(world), world.tokens["alice"])  # the sign-in lapsed too
    page = client.get(f"/panel/notebooks/{expiring.id}").text
    assert "zexpiredtext" not in page and "finding:status" not in page
    assert "This session expired at" in page and "<dt>Expired</dt>" in page
    assert "<dt>Forgets</dt>" not in page and 'class="countdown"' not in page
    gone = client.get(f"/panel/notebooks/{forgotten.id}").text
    assert "zforgottentext" not in gone and "<dt>Forgotten</dt>" in gone
    assert "<dt>Forgets</dt>" not in gone


def test_characters_that_reorder_or_hide_text_are_shown_as_marks(world: World) -> None:
    """A note's text may hold a right-to-left override: shown as it is, ``report-42\u202egpj.exe``
    would read ``report-42exe.jpg``. The panel shows each such character as a mark naming it."""
    opened = _alice_notebook(world)
    opened.remember(_add("lead:attachment", "open report-42\u202egpj.exe and a\u200bb"))
    page = _sign_in(_client(world), world.tokens["alice"]).get(f"/panel/notebooks/{opened.id}")
    assert page.status_code == 200
    assert "report-42⟦U+202E⟧gpj.exe" in page.text and "a⟦U+200B⟧b" in page.text
    assert "\u202e" not in page.text and "\u200b" not in page.text
    assert page.text.count('class="hidden-chars"') == 1  # with a warning naming them
    assert "(U+202E, U+200B)" in page.text
    # On the review page, what is accepted is exactly what is shown: no text box to edit (it
    # would show the text reordered), and Accept stores the text as proposed, characters kept.
    owner = world.owner("alice", _client(world))
    proposed = owner.post(
        "/v1/knowledge/proposals",
        json={"notebook": opened.id, "name": "lead:attachment", "source": SOURCE},
    ).json()["proposal_id"]
    reviewer = _sign_in(_client(world), world.tokens["alice"])
    review = reviewer.get("/panel/review").text
    assert "report-42⟦U+202E⟧gpj.exe" in review and "\u202e" not in review
    assert 'name="text"' not in review and "cannot be edited here" in review
    assert 'class="hidden-chars"' in review
    csrf = CSRF.search(review)
    assert csrf is not None
    decided = reviewer.post(
        f"/panel/review/{proposed}/decision",
        data={"csrf": csrf.group(1), "decision": "accept", "reason": "checked"},
    )
    assert decided.status_code == 303, decided.text
    [stored] = world.host.history("alice", "lead:attachment")
    assert stored.decision.decision == "accept"  # not "with edits": nothing was changed
    assert stored.verified_content()["text"] == "open report-42\u202egpj.exe and a\u200bb"
