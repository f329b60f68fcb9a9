"""The panel at real sizes and beyond the two lists: the landing page's documents, a notebook of
1,000 notes a page at a time (filtered by kind, searched by name), removed notes in history,
incoming links, the notice of a notebook pinned before newer knowledge, and "not found for this
account" (docs/panel.md).

The reference host's app (``create_app``, the same stack ``oh serve`` runs) serves on
127.0.0.1 under uvicorn, on an injected clock: these tests read no time from the browser. The
1,000-note notebook is written at store level into the host's own libSQL file (a second
``SqliteMemoryStore`` on ``memory.db``), 64 changes a write, which takes a fraction of a second.
The browser is Debian's Chromium driven by Playwright, launched as in ``tests/test_panel.py``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from oh.config import Locations, open_host, open_memory_store
from oh.core.changes import MAX_CHANGES, parse_changes
from oh.core.notebook import Notebook
from oh.host import Host, HostSettings
from oh.testing.browser import chromium
from oh.testing.knowledge import SOURCE
from oh.testing.lifecycle import FakeClock
from oh.testing.served import free_port, in_thread
from oh.transports.http import create_app
from oh.transports.panel.memory import PAGE_SIZE

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def _unmasked_page(text: str) -> str:
    """A page with its CSRF token left out: each page masks it afresh (docs/panel.md, CSRF)."""
    return CSRF.sub('name="csrf" value=""', text)


KINDS = ("lead", "finding", "dataset", "figure")
NOTES = 1000


def big_name(i: int) -> str:
    """The i-th note of the big notebook: kinds in turn, so each kind has 250."""
    return f"{KINDS[i % len(KINDS)]}:note-{i:04d}"


BIG_NAMES = sorted(big_name(i) for i in range(NOTES))  # the order the panel lists them in


class Scale:
    """One host on an injected clock, its app on ``url``, and a second connection to its
    memory file for writes at store level."""

    def __init__(self, data: Path, url: str) -> None:
        self.data = data
        self.url = url
        self.clock = FakeClock()
        self.host: Host = open_host(
            Locations(data), settings=HostSettings(public_url=url), clock=self.clock
        )
        self.app = create_app(self.host)
        self.memory = open_memory_store(Locations(data))  # sealed, with the host's keys
        self.tokens: dict[str, str] = {}

    def token(self, owner: str) -> str:
        if owner not in self.tokens:
            self.tokens[owner] = self.host.create_owner_token(owner)
        return self.tokens[owner]

    def notebook(self, owner: str, document: str, run: str) -> Notebook:
        self.host.register_document(owner, document)
        notebook, _ = self.host.open_notebook(owner, document, run)
        return notebook

    def write(self, notebook: Notebook, *changes: dict[str, Any], author: str = "") -> int:
        """Apply ``changes`` at store level, ``MAX_CHANGES`` a write; the new version."""
        version = self.memory.notebook(notebook.id).version
        for start in range(0, len(changes), MAX_CHANGES):
            result = self.memory.remember(
                notebook.id,
                based_on=version,
                request_id=f"scale-{version}",
                changes=parse_changes(list(changes[start : start + MAX_CHANGES])),
                author=author or f"agent:{notebook.run}",
                now=self.clock(),
            )
            version = result.version
        return version

    def client(self, owner: str) -> httpx.Client:
        """A browser-like client of ``owner``, signed in through the login form."""
        client = httpx.Client(base_url=self.url, timeout=20, follow_redirects=False)
        csrf = CSRF.search(client.get("/panel/login").text)
        assert csrf is not None
        answer = client.post(
            "/panel/login", data={"csrf": csrf.group(1), "token": self.token(owner), "next": ""}
        )
        assert answer.status_code == 303, answer.text
        return client


def _add(name: str, text: str, **links: list[str]) -> dict[str, Any]:
    return {"op": "add", "record": {"name": name, "text": text, **links}}


def _replace(name: str, text: str, **links: list[str]) -> dict[str, Any]:
    return {"op": "replace", "record": {"name": name, "text": text, **links}}


def _remove(name: str) -> dict[str, Any]:
    return {"op": "remove", "name": name}


def _big_notes() -> list[dict[str, Any]]:
    """1,000 notes, each supporting the next one and every tenth depending on the 7th after."""
    changes = []
    for i in range(NOTES):
        links: dict[str, list[str]] = {"supports": [big_name((i + 1) % NOTES)]}
        if i % 10 == 0:
            links["depends_on"] = [big_name((i + 7) % NOTES)]
        changes.append(_add(big_name(i), f"observation {i} of the reef survey", **links))
    return changes


@pytest.fixture(scope="module")
def scale(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scale]:
    port = free_port()
    world = Scale(tmp_path_factory.mktemp("panel-scale"), f"http://127.0.0.1:{port}")
    with in_thread(world.app, port):
        yield world
    world.memory.close()
    world.host.close()


@pytest.fixture(scope="module")
def big(scale: Scale) -> Notebook:
    """alice's notebook of 1,000 notes (big.pdf)."""
    notebook = scale.notebook("alice", "big.pdf", "big")
    scale.write(notebook, *_big_notes())
    return notebook


def _articles(text: str, section: str) -> list[str]:
    """The ids of the records the page shows in ``section`` (notes, removed or reviewed)."""
    start = text.index(f'<section id="{section}"')
    end = text.index("</section>", start)
    return re.findall(r'<article class="[^"]*" id="([^"]+)"', text[start:end])


def _article(text: str, anchor: str) -> str:
    start = text.index(f'id="{anchor}"')
    return text[start : text.index("</article>", start)]


# -- over plain HTTP ---------------------------------------------------------------------------


def test_a_thousand_notes_are_shown_a_page_at_a_time(scale: Scale, big: Notebook) -> None:
    alice = scale.client("alice")
    panel = f"/panel/notebooks/{big.id}"
    first = alice.get(panel)
    assert first.status_code == 200
    assert _articles(first.text, "notes") == [f"record-{n}" for n in BIG_NAMES[:PAGE_SIZE]]
    assert f"Showing 1–{PAGE_SIZE} of 1,000 working notes." in first.text
    pages = -(-NOTES // PAGE_SIZE)
    assert f"Page 1 of {pages}" in first.text
    assert f'href="{panel}?page=2" rel="next">Next</a>' in first.text
    assert f'href="{panel}?page={pages}">Last</a>' in first.text
    last = alice.get(f"{panel}?page={pages}").text
    assert _articles(last, "notes") == [f"record-{n}" for n in BIG_NAMES[(pages - 1) * PAGE_SIZE :]]
    assert f'href="{panel}?page={pages - 1}" rel="prev">Previous</a>' in last
    assert 'rel="next"' not in last
    # Past the last page is the last page; a page that is not a number is refused.
    assert _articles(alice.get(f"{panel}?page=999").text, "notes") == _articles(last, "notes")
    for bad in ("0", "-1", "x", "1.5", "²", "9" * 12):
        answer = alice.get(panel, params={"page": bad})
        assert answer.status_code == 400, bad
        assert '<code class="code">invalid_argument</code>' in answer.text


def test_the_first_page_of_a_thousand_notes_is_small_and_sent_compressed(
    scale: Scale, big: Notebook
) -> None:
    """One compact line per note, the rest opened in place: the page is at most 150 KB of
    HTML, sent gzip-compressed to a browser that accepts it; the assets are cached for good
    (each page names them with their version)."""
    alice = scale.client("alice")
    panel = f"/panel/notebooks/{big.id}"
    first = alice.get(panel, headers={"Accept-Encoding": "gzip"})
    assert first.status_code == 200 and len(_articles(first.text, "notes")) == PAGE_SIZE
    assert len(first.content) <= 150_000, len(first.content)
    assert first.headers["content-encoding"] == "gzip"
    assert first.num_bytes_downloaded < len(first.content) // 5
    assert first.headers["cache-control"] == "no-store"  # a page is never cached
    plain = alice.get(panel, headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers
    assert _unmasked_page(plain.text) == _unmasked_page(first.text)
    # Each note's history and its propose form are pages of their own, not in the list.
    assert "<ol reversed" not in first.text and 'name="passage"' not in first.text
    version = re.search(r'panel\.css\?v=([0-9a-f]+)"', first.text)
    assert version is not None
    style = alice.get(f"/panel/static/panel.css?v={version.group(1)}")
    assert style.headers["cache-control"] == "public, max-age=31536000, immutable"
    assert style.headers["content-encoding"] == "gzip"
    # The API answers as it always did: compression is the panel's.
    records = alice.get(
        f"/v1/notebooks/{big.id}/records",
        headers={"Accept-Encoding": "gzip", "Authorization": f"Bearer {scale.token('alice')}"},
    )
    assert records.status_code == 200 and len(records.content) > 100_000
    assert "content-encoding" not in records.headers


def test_search_finds_words_in_names_texts_and_fields_and_sort_orders_the_list(
    scale: Scale,
) -> None:
    """Words in any order and any case, each the start of a word of a name, a text or a field
    value; sealed notes are searched as the owner reads them, and nothing of the search reaches
    the disk. Sorting by name, newest, oldest and most revised."""
    notebook = scale.notebook("grace", "search.pdf", "search")
    scale.write(notebook, _add("lead:heron-gauge", "Tide gauge near the heron colony drifts"))
    scale.clock.advance(minutes=1)
    scale.write(
        notebook,
        {
            "op": "add",
            "record": {
                "name": "dataset:tides",
                "text": "Hourly series",
                "fields": {"station": "Osprey Point", "years": 12},
            },
        },
    )
    scale.clock.advance(minutes=1)
    scale.write(notebook, _add("finding:osprey-nests", "Nests counted on the 12th of May"))
    scale.clock.advance(minutes=1)
    for text in ("second look", "third look"):
        scale.write(notebook, _replace("lead:heron-gauge", f"Tide gauge: {text}"))
    grace = scale.client("grace")
    panel = f"/panel/notebooks/{notebook.id}"

    def found(**params: str) -> list[str]:
        return _articles(grace.get(panel, params=params).text, "notes")

    assert found(q="HERON GAUGE") == ["record-lead:heron-gauge"]  # the name, any case
    assert found(q="gauge heron") == ["record-lead:heron-gauge"]  # any order
    assert found(q="third") == ["record-lead:heron-gauge"]  # its current text
    assert found(q="second") == []  # not an earlier version's
    assert found(q="osprey") == ["record-dataset:tides", "record-finding:osprey-nests"]
    assert found(q="osprey point") == ["record-dataset:tides"]  # a field's value
    assert found(q="12") == ["record-dataset:tides", "record-finding:osprey-nests"]
    assert found(q="eron") == []  # the start of a word, not any part of one
    assert found(q="osprey", kind="finding") == ["record-finding:osprey-nests"]
    # The words the search looked for are nowhere on disk: sealed notes are opened to search.
    for path in scale.data.rglob("*"):
        if path.is_file():
            content = path.read_bytes()
            assert b"Osprey" not in content and b"heron colony" not in content, path
    # Sorting: by name (the default), newest or oldest write first, most versions first.
    names = ["dataset:tides", "finding:osprey-nests", "lead:heron-gauge"]
    assert found() == [f"record-{n}" for n in names]
    newest = ["lead:heron-gauge", "finding:osprey-nests", "dataset:tides"]
    assert found(sort="newest") == [f"record-{n}" for n in newest]
    oldest = ["dataset:tides", "finding:osprey-nests", "lead:heron-gauge"]
    assert found(sort="oldest") == [f"record-{n}" for n in oldest]
    assert found(sort="revised")[0] == "record-lead:heron-gauge"  # 3 versions
    sorted_page = grace.get(panel, params={"sort": "newest", "size": "25"}).text
    assert '<option value="newest" selected>Newest first</option>' in sorted_page
    assert f'href="{panel}/notes/forget?name=lead%3Aheron-gauge&amp;sort=newest&amp;size=25"' in (
        sorted_page
    )
    assert grace.get(panel, params={"sort": "random"}).status_code == 400


def test_filtering_by_kind_and_name_keeps_the_filter_in_every_link(
    scale: Scale, big: Notebook
) -> None:
    alice = scale.client("alice")
    panel = f"/panel/notebooks/{big.id}"
    leads = [n for n in BIG_NAMES if n.startswith("lead:")]
    page = alice.get(panel, params={"kind": "lead"}).text
    assert _articles(page, "notes") == [f"record-{n}" for n in leads[:PAGE_SIZE]]
    assert f"Showing 1–{PAGE_SIZE} of 250 (of 1,000 without the filter) working notes." in page
    assert '<option value="lead" selected>lead (250)</option>' in page
    assert f'href="{panel}?kind=lead&amp;page=2" rel="next">Next</a>' in page
    third = alice.get(panel, params={"kind": "lead", "page": "3"}).text
    on_third = leads[2 * PAGE_SIZE : 3 * PAGE_SIZE]
    assert _articles(third, "notes") == [f"record-{n}" for n in on_third]
    # The pages a note's actions lead to, and their forms, come back to the filtered page.
    name = quote(on_third[0], safe="")
    assert f'href="{panel}/notes/forget?name={name}&amp;kind=lead&amp;page=3"' in third
    assert f'href="{panel}/propose?name={name}&amp;kind=lead&amp;page=3"' in third
    confirm = alice.get(f"{panel}/notes/forget", params={"name": on_third[0], "kind": "lead",
                                                         "page": "3"}).text  # fmt: skip
    assert f'action="{panel}/notes/forget?kind=lead&amp;page=3"' in confirm
    assert f'href="{panel}?kind=lead&amp;page=3#record-{on_third[0]}"' in confirm  # Cancel
    # The owner's page size is kept in every link too.
    small = alice.get(panel, params={"kind": "lead", "size": "25"}).text
    assert len(_articles(small, "notes")) == 25
    assert f'href="{panel}?kind=lead&amp;size=25&amp;page=2" rel="next">Next</a>' in small
    assert '<option value="25" selected>25</option>' in small
    for bad in ("0", "30", "x", "1000"):
        assert alice.get(panel, params={"size": bad}).status_code == 400, bad
    # Search by a part of the name (any case), alone or with a kind.
    found = alice.get(panel, params={"q": "NOTE-012"}).text
    expected = sorted(n for n in BIG_NAMES if "note-012" in n)
    assert _articles(found, "notes") == [f"record-{n}" for n in expected]
    assert len(expected) == 10 and 'rel="next"' not in found
    assert 'value="note-012"' in found
    both = alice.get(panel, params={"kind": "finding", "q": "note-01"}).text
    assert _articles(both, "notes") == [
        f"record-{n}" for n in BIG_NAMES if n.startswith("finding:") and "note-01" in n
    ]
    none = alice.get(panel, params={"q": "no-such-name"}).text
    assert _articles(none, "notes") == []
    assert "No working notes match the filter." in none
    assert f'<a href="{panel}">Clear the filter</a>' in none
    # What the page echoes from its address is escaped.
    hostile = alice.get(panel, params={"q": '"><script>window.x=1</script>'})
    assert hostile.status_code == 200
    assert 'value="&quot;&gt;&lt;script&gt;window.x=1&lt;/script&gt;"' in hostile.text
    assert "<script>window" not in hostile.text
    for params in ({"kind": "Lead"}, {"kind": "lead:x"}, {"q": "x" * 121}, {"q": "a\x00b"}):
        answer = alice.get(panel, params=params)
        assert answer.status_code == 400, params
        assert '<code class="code">invalid_argument</code>' in answer.text


def test_a_link_to_a_note_on_another_page_goes_to_that_page(scale: Scale, big: Notebook) -> None:
    alice = scale.client("alice")
    panel = f"/panel/notebooks/{big.id}"
    first = BIG_NAMES[0]  # dataset:note-0002, which supports figure:note-0003
    target = big_name(3)
    target_page = BIG_NAMES.index(target) // PAGE_SIZE + 1
    assert target_page > 1
    text = alice.get(panel).text
    article = _article(text, f"record-{first}")
    assert f'href="{panel}?page={target_page}#record-{target}">{target}</a>' in article
    # Filtered out by the kind: the link leaves the filter and asks for the note by name.
    filtered = _article(alice.get(panel, params={"kind": "dataset"}).text, f"record-{first}")
    assert f'href="{panel}?at={target.replace(":", "%3A")}#record-{target}"' in filtered
    # ?at=NAME shows the pages that hold NAME, and the links on it say which page that is.
    shown = alice.get(panel, params={"at": target}).text
    assert f"record-{target}" in _articles(shown, "notes")
    assert f"Page {target_page} of" in shown
    assert alice.get(panel, params={"at": "not a name"}).status_code == 400


def test_each_note_shows_the_notes_that_point_at_it(scale: Scale) -> None:
    notebook = scale.notebook("erin", "links.pdf", "links")
    scale.write(
        notebook,
        _add("finding:target", "the point everything is about"),
        _add("lead:supporter", "backs it up", supports=["finding:target"]),
        _add("lead:dependant", "builds on it", depends_on=["finding:target"]),
        _add("lead:doubter", "says otherwise", contradicts=["finding:target"]),
        _add("lead:both", "backs and builds", supports=["finding:target", "lead:supporter"]),
    )
    text = scale.client("erin").get(f"/panel/notebooks/{notebook.id}").text
    target = _article(text, "record-finding:target")
    assert re.search(
        r'<dt class="incoming">Supported by</dt><dd class="incoming">'
        r'<a href="#record-lead:both">lead:both</a>, '
        r'<a href="#record-lead:supporter">lead:supporter</a></dd>',
        target,
    ), target
    assert (
        '<dt class="incoming">Depended on by</dt><dd class="incoming">'
        '<a href="#record-lead:dependant">lead:dependant</a></dd>'
    ) in target
    assert '<a href="#record-lead:doubter">lead:doubter</a>' in target
    supporter = _article(text, "record-lead:supporter")
    assert '<dt>Supports</dt><dd><a href="#record-finding:target">' in supporter  # outgoing
    assert '<a href="#record-lead:both">lead:both</a>' in supporter  # and incoming
    assert "incoming" not in _article(text, "record-lead:doubter")


def test_removed_notes_stay_visible_in_history_with_their_last_version(scale: Scale) -> None:
    notebook = scale.notebook("frank", "removed.pdf", "removals")
    scale.write(notebook, _add("lead:dropped", "first guess"), _add("lead:kept", "still here"))
    scale.clock.advance(minutes=1)
    scale.write(notebook, _replace("lead:dropped", "second guess", supports=["lead:kept"]))
    scale.clock.advance(minutes=1)
    scale.write(notebook, _remove("lead:dropped"))
    # Removed and added again: current again, not listed as removed.
    for change in (_add("lead:back", "here"), _remove("lead:back"), _add("lead:back", "again")):
        scale.write(notebook, change)
    frank = scale.client("frank")
    panel = f"/panel/notebooks/{notebook.id}"
    text = frank.get(panel).text
    assert _articles(text, "notes") == ["record-lead:back", "record-lead:kept"]
    assert _articles(text, "removed") == ["removed-lead:dropped"]
    removed = _article(text, "removed-lead:dropped")
    assert 'class="record note removed"' in text
    assert '<span class="badge removed-badge">removed</span>' in removed
    assert '<p class="text">second guess</p>' in removed  # its last version
    assert "version 2" in removed
    assert "<strong>Removed</strong> at version 3 by agent:removals" in removed
    assert "History (3 versions)" in removed
    history = frank.get(
        f"{panel}/history", params={"name": "lead:dropped", "origin": "removed"}
    ).text
    for label in ("version 3 · removed", "version 2 · replaced", "version 1 · added"):
        assert label in history
    assert "Forget this note" not in removed and "Propose for review" not in removed
    # Its links no longer hold: the note it supported lists no supporter.
    assert "Supported by" not in _article(text, "record-lead:kept")
    # The owner forgets a note from the panel: it moves to the removed notes, by the owner.
    csrf = CSRF.search(text)
    assert csrf is not None
    unconfirmed = frank.post(
        f"{panel}/notes/forget", data={"csrf": csrf.group(1), "name": "lead:kept"}
    )
    assert unconfirmed.status_code == 400  # forgetting a note is confirmed first
    assert _articles(frank.get(panel).text, "notes") == ["record-lead:back", "record-lead:kept"]
    answer = frank.post(
        f"{panel}/notes/forget", data={"csrf": csrf.group(1), "name": "lead:kept", "confirm": "yes"}
    )
    assert answer.status_code == 303
    assert answer.headers["location"] == f"{panel}?forgot=lead%3Akept#record-lead:back"
    after = frank.get(panel).text
    assert _articles(after, "removed") == ["removed-lead:dropped", "removed-lead:kept"]
    assert "<strong>Removed</strong> at version 7 by owner:frank" in _article(
        after, "removed-lead:kept"
    )
    # A link to a removed note goes to it, marked as removed.
    scale.write(notebook, _add("lead:cites", "cites the dropped one", depends_on=["lead:dropped"]))
    cites = _article(frank.get(panel).text, "record-lead:cites")
    assert '<a href="#removed-lead:dropped">lead:dropped</a> <span class="removed-flag">' in cites


def test_a_notebook_pinned_before_newer_reviewed_knowledge_says_so(scale: Scale) -> None:
    early = scale.notebook("gina", "pin.pdf", "early")
    scale.write(early, _add("finding:one", "first finding"), _add("finding:two", "second one"))

    def accept(name: str) -> int:
        made = scale.host.propose("gina", {"notebook": early.id, "name": name, "source": SOURCE})
        decided = scale.host.decide(
            "gina", made["proposal_id"], {"decision": "accept", "reason": "checked"}
        )
        return int(decided["revision"])

    assert early.pinned_revision == 0
    assert accept("finding:one") == 1
    later = scale.notebook("gina", "pin.pdf", "later")
    assert later.pinned_revision == 1
    gina = scale.client("gina")
    notice = re.compile(
        r'<p class="notice pin" role="status">This session is pinned at revision'
        r" <strong>(\d+)</strong> of your reviewed knowledge; the latest is revision"
        r" <strong>(\d+)</strong>"
    )
    found = notice.search(gina.get(f"/panel/notebooks/{early.id}").text)
    assert found is not None and found.groups() == ("0", "1")
    assert notice.search(gina.get(f"/panel/notebooks/{later.id}").text) is None
    assert accept("finding:two") == 2
    found = notice.search(gina.get(f"/panel/notebooks/{later.id}").text)
    assert found is not None and found.groups() == ("1", "2")


def test_another_owners_notebook_is_not_found_for_this_account(scale: Scale, big: Notebook) -> None:
    bob = scale.client("bob")
    scale.notebook("bob", "bobs.pdf", "mine")
    missing = "nb_" + "0" * 32
    theirs = bob.get(f"/panel/notebooks/{big.id}")
    nothing = bob.get(f"/panel/notebooks/{missing}")
    assert theirs.status_code == nothing.status_code == 404
    assert theirs.headers["content-type"] == nothing.headers["content-type"]
    assert _unmasked_page(theirs.text.replace(big.id, "ID")) == _unmasked_page(
        nothing.text.replace(missing, "ID")
    )
    assert "Not found for this account" in theirs.text
    assert "big.pdf" not in theirs.text and "observation" not in theirs.text
    for path in ("?kind=lead", "?page=2", "/forget"):
        one = bob.get(f"/panel/notebooks/{big.id}{path}")
        other = bob.get(f"/panel/notebooks/{missing}{path}")
        assert one.status_code == other.status_code == 404, path
        assert _unmasked_page(one.text.replace(big.id, "ID")) == _unmasked_page(
            other.text.replace(missing, "ID")
        ), path
    # A document's own list answers the same way for another owner's and a missing one.
    doc = bob.get("/panel/notebooks", params={"document": "big.pdf"})
    none = bob.get("/panel/notebooks", params={"document": "nowhere.pdf"})
    assert doc.status_code == none.status_code == 404
    assert _unmasked_page(doc.text.replace("big.pdf", "X")) == _unmasked_page(
        none.text.replace("nowhere.pdf", "X")
    )
    assert "Not found for this account" in doc.text


# -- in a real browser -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture
def context(browser: Any) -> Iterator[Any]:
    made: list[Any] = []

    def new(**options: Any) -> Any:
        opened = browser.new_context(**options)
        opened.set_default_timeout(10_000)
        made.append(opened)
        return opened.new_page()

    yield new
    for opened in made:
        opened.close()


def _login(page: Any, scale: Scale, owner: str, path: str) -> None:
    page.goto(scale.url + path)
    assert "/panel/login" in page.url
    page.get_by_label("Owner token").fill(scale.token(owner))
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(scale.url + path)


def test_in_the_browser_the_owner_searches_words_and_sorts_a_thousand_notes(
    scale: Scale, big: Notebook, context: Any
) -> None:
    from playwright.sync_api import expect

    scale.clock.advance(minutes=3)
    [kept] = [
        change["record"] for change in _big_notes() if change["record"]["name"] == BIG_NAMES[500]
    ]
    links = {key: kept[key] for key in ("supports", "depends_on") if key in kept}
    scale.write(big, _replace(BIG_NAMES[500], "the HERON gauge drifts after storms", **links))
    page = context()
    _login(page, scale, "alice", f"/panel/notebooks/{big.id}")
    notes = page.locator("#notes article")
    # Words of the text, in any order and case, find the note among a thousand.
    page.get_by_label("Search").fill("gauge heron")
    page.get_by_role("button", name="Filter").click()
    expect(notes).to_have_count(1)
    expect(notes.first).to_have_id(f"record-{BIG_NAMES[500]}")
    # Newest first: what the agent wrote last comes first, marked with its version.
    page.get_by_role("link", name="Clear the filter").click()
    page.get_by_label("Sort").select_option("newest")
    page.get_by_role("button", name="Filter").click()
    expect(notes.first).to_have_id(f"record-{BIG_NAMES[500]}")
    expect(notes.first.locator("summary .meta")).to_contain_text("version")
    page.get_by_label("Sort").select_option("revised")
    page.get_by_role("button", name="Filter").click()
    expect(notes.first).to_have_id(f"record-{BIG_NAMES[500]}")  # two versions, the others one
    page.get_by_label("Sort").select_option("oldest")
    page.get_by_role("button", name="Filter").click()
    expect(notes.first).not_to_have_id(f"record-{BIG_NAMES[500]}")
    expect(
        page.get_by_role("navigation", name="Pages of working notes", exact=True)
    ).to_contain_text("Page 1 of")


def test_in_the_browser_the_owner_finds_the_busy_notebook_among_150(
    scale: Scale, context: Any
) -> None:
    from playwright.sync_api import expect

    runs = []
    for i in range(150):
        scale.clock.advance(seconds=5)
        runs.append(scale.notebook("olga", "many.pdf", f"run-{i:03d}"))
    scale.clock.advance(minutes=1)
    busy = runs[7]
    scale.write(busy, *[_add(f"lead:n-{i}", "busy") for i in range(9)])
    page = context()
    _login(page, scale, "olga", "/panel/notebooks")
    many = page.get_by_role("region", name="Document many.pdf")
    expect(many.locator("tbody tr")).to_have_count(5)  # the newest five; the busy one is not
    many.get_by_role("link", name="All notebooks of many.pdf").click()
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(100)
    expect(page.locator(".count")).to_have_text("Showing 1–100 of 150 notebooks.")
    finder = page.get_by_role("search", name="Find a notebook")
    finder.get_by_label("Order").select_option("active")
    finder.get_by_role("button", name="Find").click()
    expect(rows.first).to_contain_text("run-007")
    expect(rows.first.locator("td.number")).to_have_text("9")
    finder = page.get_by_role("search", name="Find a notebook")
    finder.get_by_label("Run contains").fill("RUN-14")
    finder.get_by_role("button", name="Find").click()
    expect(rows).to_have_count(10)  # run-140 … run-149
    page.get_by_role("link", name="Clear").click()
    page.get_by_role("navigation", name="Pages of notebooks").get_by_role(
        "link", name="Last"
    ).click()
    expect(rows).to_have_count(50)
    expect(rows.last).to_contain_text("run-000")


def test_in_the_browser_the_landing_page_lists_documents_and_notebooks_in_every_state(
    scale: Scale, context: Any
) -> None:
    from playwright.sync_api import expect

    now = scale.clock.now
    scale.clock.now = now.replace(year=now.year - 1)  # a run a year ago: expired by now
    old = scale.notebook("hana", "reef.pdf", "last-year")
    scale.clock.now = now
    opened = scale.notebook("hana", "reef.pdf", "today")
    scale.clock.advance(seconds=1)
    gone = scale.notebook("hana", "reef.pdf", "forgotten")
    scale.host.forget("hana", gone.id)
    scale.host.register_document("hana", "atoll.pdf")
    page = context()
    _login(page, scale, "hana", "/panel/notebooks")
    expect(page.get_by_role("heading", name="Your documents and notebooks")).to_be_visible()
    atoll = page.get_by_role("region", name="Document atoll.pdf")
    expect(atoll).to_contain_text("No notebook yet")
    expect(atoll.locator("table")).to_have_count(0)
    reef = page.get_by_role("region", name="Document reef.pdf")
    rows = reef.locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("forgotten")
    expect(rows.nth(0)).to_contain_text(re.compile(r"forgotten \d{4}-\d\d-\d\d"))  # when
    expect(rows.nth(1)).to_contain_text("open")
    expect(rows.nth(2)).to_contain_text("expired, waiting for the purge")
    assert page.locator("h2").all_text_contents() == ["atoll.pdf", "reef.pdf"]
    reef.get_by_role("link", name="last-year").click()
    page.wait_for_url(f"{scale.url}/panel/notebooks/{old.id}")
    expect(page.locator('[data-field="state"]')).to_have_text("expired")
    page.go_back()
    reef.get_by_role("link", name="today").click()
    page.wait_for_url(f"{scale.url}/panel/notebooks/{opened.id}")


def test_in_the_browser_a_thousand_notes_are_paged_filtered_and_searched(
    scale: Scale, big: Notebook, context: Any
) -> None:
    from playwright.sync_api import expect

    page = context()
    panel = f"{scale.url}/panel/notebooks/{big.id}"
    _login(page, scale, "alice", f"/panel/notebooks/{big.id}")
    notes = page.locator("#notes article")
    expect(notes).to_have_count(PAGE_SIZE)
    expect(notes.first).to_have_id(f"record-{BIG_NAMES[0]}")
    expect(page.locator("#notes .count")).to_have_text(
        f"Showing 1–{PAGE_SIZE} of 1,000 working notes."
    )
    pager = page.get_by_role("navigation", name="Pages of working notes", exact=True)
    pager.get_by_role("link", name="Next").click()
    page.wait_for_url(f"{panel}?page=2")
    expect(notes.first).to_have_id(f"record-{BIG_NAMES[PAGE_SIZE]}")
    expect(pager.locator(".current")).to_have_text(f"Page 2 of {-(-NOTES // PAGE_SIZE)}")
    # The pager below the list goes the same way.
    below = page.get_by_role("navigation", name="Pages of working notes, below the list")
    below.get_by_role("link", name="Previous").click()
    page.wait_for_url(f"{panel}")
    # Filter by kind: the filter resets the page and every later link keeps it.
    page.get_by_label("Kind").select_option("finding")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(f"{panel}?kind=finding&q=&sort=name&size={PAGE_SIZE}")
    findings = [n for n in BIG_NAMES if n.startswith("finding:")]
    expect(notes).to_have_count(PAGE_SIZE)
    expect(notes.first).to_have_id(f"record-{findings[0]}")
    pager.get_by_role("link", name="Last").click()
    last_page = -(-len(findings) // PAGE_SIZE)
    page.wait_for_url(f"{panel}?kind=finding&page={last_page}")
    expect(notes).to_have_count(len(findings) - (last_page - 1) * PAGE_SIZE)
    expect(notes.last).to_have_id(f"record-{findings[-1]}")
    # Search by name within the kind.
    page.get_by_label("Search").fill("note-05")
    page.get_by_role("button", name="Filter").click()
    expected = [f"record-{n}" for n in findings if "note-05" in n]
    expect(notes).to_have_count(len(expected))
    assert [notes.nth(i).get_attribute("id") for i in range(len(expected))] == expected
    expect(page.get_by_role("navigation", name="Pages of working notes")).to_have_count(0)
    # The owner chooses how many notes a page shows.
    page.get_by_label("Per page").select_option("200")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_label("Per page")).to_have_value("200")
    page.get_by_role("link", name="Clear the filter").click()
    page.wait_for_url(panel)
    expect(notes).to_have_count(PAGE_SIZE)


def test_in_the_browser_the_panel_pages_and_filters_without_javascript(
    scale: Scale, big: Notebook, context: Any
) -> None:
    from playwright.sync_api import expect

    page = context(java_script_enabled=False)
    panel = f"{scale.url}/panel/notebooks/{big.id}"
    _login(page, scale, "alice", f"/panel/notebooks/{big.id}")
    page.get_by_label("Kind").select_option("lead")
    page.get_by_label("Search").fill("note-00")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url(f"{panel}?kind=lead&q=note-00&sort=name&size={PAGE_SIZE}")
    expected = [f"record-{n}" for n in BIG_NAMES if n.startswith("lead:") and "note-00" in n]
    expect(page.locator("#notes article")).to_have_count(len(expected))
    page.get_by_role("link", name="Clear the filter").click()
    page.wait_for_url(panel)
    page.get_by_role("navigation", name="Pages of working notes", exact=True).get_by_role(
        "link", name="Last"
    ).click()
    page.wait_for_url(f"{panel}?page={-(-NOTES // PAGE_SIZE)}")
    last = page.locator("#notes article").last
    expect(last).to_have_id(f"record-{BIG_NAMES[-1]}")
    # A record opens in place without the script, and its history is a page of its own.
    last.locator("summary").first.click()
    expect(last.locator(".body")).to_be_visible()
    last.get_by_text("History (1 version)").click()
    last.get_by_role("link", name=f"Every version of {BIG_NAMES[-1]}").click()
    expect(page.locator("#history li")).to_have_count(1)


def test_in_the_browser_links_cross_pages_and_a_card_anchor_finds_its_page(
    scale: Scale, big: Notebook, context: Any
) -> None:
    from playwright.sync_api import expect

    page = context()
    panel = f"{scale.url}/panel/notebooks/{big.id}"
    _login(page, scale, "alice", f"/panel/notebooks/{big.id}")
    first = page.locator(f'[id="record-{BIG_NAMES[0]}"]')
    first.locator("summary").first.click()
    target = big_name(3)
    # Outgoing: a link to a note on another page opens that page at the note.
    first.locator("dl.links").get_by_role("link", name=target, exact=True).click()
    expect(page.locator(":target")).to_have_id(f"record-{target}")
    # Incoming: the note shows which note supports it; the link goes back.
    supporter = big_name(2)
    incoming = page.locator(f'[id="record-{target}"] dd.incoming')
    expect(incoming).to_contain_text(supporter)
    incoming.get_by_role("link", name=supporter, exact=True).click()
    expect(page.locator(":target")).to_have_id(f"record-{supporter}")
    # A memory card links to /panel/notebooks/ID#record-NAME: the script finds its page.
    last = BIG_NAMES[-1]
    page.goto(f"{panel}#record-{last}")
    page.wait_for_url(re.compile(r"\?at="))
    expect(page.locator(":target")).to_have_id(f"record-{last}")
    expect(page.locator(f'[id="record-{last}"]')).to_be_in_viewport()


def test_in_the_browser_the_owner_forgets_a_note_and_finds_it_in_the_removed_notes(
    scale: Scale, context: Any
) -> None:
    from playwright.sync_api import expect

    notebook = scale.notebook("ivan", "forget.pdf", "forget-one")
    scale.write(
        notebook,
        _add("lead:drop-me", "a wrong guess"),
        _add("lead:keep-me", "still useful", depends_on=["lead:drop-me"]),
    )
    scale.write(notebook, _replace("lead:drop-me", "a wrong guess, revised"))
    scale.write(notebook, _add("lead:agent-removed", "gone soon"))
    scale.write(notebook, _remove("lead:agent-removed"))
    page = context()
    _login(page, scale, "ivan", f"/panel/notebooks/{notebook.id}")
    removed = page.locator("#removed article")
    expect(removed).to_have_count(1)
    agent = page.locator('[id="removed-lead:agent-removed"]')
    expect(agent.locator(".removal")).to_contain_text("Removed at version 4 by agent:forget-one")
    expect(agent.locator(".body > .text")).to_have_text("gone soon")
    page.locator('[id="record-lead:drop-me"] summary').first.click()
    page.get_by_role("link", name="Forget this note lead:drop-me").click()
    page.get_by_role("button", name="Yes, forget this note").click()
    page.wait_for_url(re.compile(r".*forgot=lead%3Adrop-me#record-lead:keep-me$"))
    expect(page.locator(".notice.ok")).to_contain_text("It is under Removed notes")
    expect(page.locator('[id="record-lead:drop-me"]')).to_have_count(0)
    expect(removed).to_have_count(2)
    dropped = page.locator('[id="removed-lead:drop-me"]')
    expect(dropped.locator(".removed-badge")).to_have_text("removed")
    expect(dropped.locator(".removal")).to_contain_text("Removed at version 5 by owner:ivan")
    expect(dropped.locator(".body > .text")).to_have_text("a wrong guess, revised")
    dropped.locator("summary").first.click()
    dropped.get_by_text("History (3 versions)").click()
    versions = dropped.locator(".history li")
    expect(versions).to_have_count(3)
    expect(versions.nth(0)).to_contain_text("version 5 · removed")
    expect(versions.nth(0)).to_contain_text("owner:ivan")
    expect(versions.nth(1)).to_contain_text("a wrong guess, revised")
    expect(versions.nth(2)).to_contain_text("version 1 · added")
    # The note that depended on it still names it, as a removed note, and links to it.
    keep = page.locator('[id="record-lead:keep-me"]')
    expect(keep.locator(".removed-flag")).to_have_text("(removed)")
    expect(keep.locator(".body")).to_be_visible()  # the place the owner came back to, open
    keep.get_by_role("link", name="lead:drop-me").click()
    expect(page.locator(":target")).to_have_id("removed-lead:drop-me")
    # A card's anchor for the forgotten note finds it among the removed notes.
    page.goto(f"{scale.url}/panel/notebooks/{notebook.id}#record-lead:agent-removed")
    page.wait_for_function("location.hash === '#removed-lead:agent-removed'")


def test_in_the_browser_the_pin_notice_names_both_revisions(scale: Scale, context: Any) -> None:
    from playwright.sync_api import expect

    pinned = scale.notebook("jo", "pinned.pdf", "pinned")
    scale.write(pinned, _add("finding:reviewed-later", "accepted after the pin"))
    made = scale.host.propose(
        "jo", {"notebook": pinned.id, "name": "finding:reviewed-later", "source": SOURCE}
    )
    scale.host.decide("jo", made["proposal_id"], {"decision": "accept", "reason": "fine"})
    page = context()
    _login(page, scale, "jo", f"/panel/notebooks/{pinned.id}")
    notice = page.locator(".notice.pin")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text("pinned at revision 0")
    expect(notice).to_contain_text("the latest is revision 1")
    expect(page.locator("#reviewed .empty")).to_have_text("No reviewed knowledge in view.")
    notice.get_by_role("link", name="revision 1").click()
    page.wait_for_url(f"{scale.url}/panel/review?revision=1")
    expect(page.locator("#knowledge article")).to_contain_text("finding:reviewed-later")


def test_in_the_browser_another_owners_notebook_is_not_found_for_this_account(
    scale: Scale, big: Notebook, context: Any
) -> None:
    from playwright.sync_api import expect

    page = context()
    _login(page, scale, "bob", "/panel/notebooks")
    seen = []
    for notebook_id in (big.id, "nb_" + "f" * 32):
        answer = page.goto(f"{scale.url}/panel/notebooks/{notebook_id}")
        assert answer is not None and answer.status == 404
        expect(page.get_by_role("heading", name="Not found for this account")).to_be_visible()
        expect(page.locator("code.code")).to_have_text("not_found")
        seen.append(page.locator("main").inner_text().replace(notebook_id, "ID"))
        assert "big.pdf" not in page.content()
    assert seen[0] == seen[1]
    page.get_by_role("link", name="Your documents and notebooks").click()
    page.wait_for_url(f"{scale.url}/panel/notebooks")
    assert html.escape("big.pdf") not in page.content()
