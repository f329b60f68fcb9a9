"""The owner's way in: their documents, each with its notebooks linking to their Memory panels.

``GET /`` sends a browser here (``/panel/notebooks``); an owner who is not signed in gets the
sign-in form first. The page lists the owner's registered documents by name, a page at a time
(the host's ``list_documents``), each with its newest notebooks (``list_notebooks`` on that
document) — a document without any notebook yet says so. ``?document=DOC`` is one document's
own list: all its notebooks, found by run and state, newest or most recently written first, a
page at a time (``NotebookQuery``). Every notebook shows how many working notes it holds and
when it was last written, and its real state and time: open until, expired at, forgotten at.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from oh.core.identifiers import contains_control
from oh.errors import InvalidArgument
from oh.transports.panel.layout import Chrome, esc, page, pager, remaining, time_tag

if TYPE_CHECKING:
    from oh.host import Host

__all__ = [
    "DOCUMENTS_PAGE_SIZE",
    "NOTEBOOKS_PAGE_SIZE",
    "NOTEBOOKS_SHOWN",
    "DocumentNotebooks",
    "NotebookQuery",
    "document_notebooks",
    "landing_view",
    "render_document",
    "render_landing",
]

DOCUMENTS_PAGE_SIZE = 50  # documents on one page of the landing page
NOTEBOOKS_SHOWN = 5  # a document's newest notebooks shown on the landing page
NOTEBOOKS_PAGE_SIZE = 100  # notebooks on one page of a document's own list
MAX_NOTEBOOKS = 10_000  # notebooks of one document its own list reads to find and order them
_FILTER_STATES = {"open": "Open", "expired": "Expired", "forgotten": "Forgotten"}
_ORDERS = {"newest": "Newest first", "active": "Last written first"}

_STATES = {
    "open": "open",
    "expired": "expired, waiting for the purge",
    "purged": "forgotten",
    "empty": "forgotten",
    "opening": "opening",
}
_TITLE = "Your documents and notebooks"


@dataclass(frozen=True, slots=True)
class NotebookQuery:
    """What a document's own list was asked for: a part of the run id (``q``), a state
    (``open``, ``expired`` or ``forgotten``), an order (``newest`` started, or ``active``: last
    written) and a page."""

    search: str | None = None
    state: str | None = None
    order: str = "newest"
    page: int = 1

    @classmethod
    def parse(cls, params: Any) -> NotebookQuery:
        search = (params.get("q") or "").strip().casefold() or None
        if search is not None and (len(search) > 120 or contains_control(search)):
            raise InvalidArgument("q is text of at most 120 characters")
        state = params.get("state") or None
        if state is not None and state not in _FILTER_STATES:
            raise InvalidArgument(f"state is one of {', '.join(_FILTER_STATES)}")
        order = params.get("order") or "newest"
        if order not in _ORDERS:
            raise InvalidArgument(f"order is one of {', '.join(_ORDERS)}")
        raw = params.get("page") or "1"
        if not (raw.isascii() and raw.isdigit() and len(raw) <= 6 and int(raw) >= 1):
            raise InvalidArgument("page is a whole number from 1")
        return cls(search, state, order, int(raw))

    def items(self, **changed: Any) -> list[tuple[str, str]]:
        query = replace(self, **changed)
        items = [("q", query.search or ""), ("state", query.state or "")]
        items += [("order", query.order if query.order != "newest" else "")]
        items += [("page", str(query.page) if query.page > 1 else "")]
        return [(key, value) for key, value in items if value]


@dataclass(frozen=True, slots=True)
class DocumentNotebooks:
    """One document as a page lists it: its notebooks (the newest, or a page of its own list),
    whether it has more, and each notebook's ``(notes, last written)``."""

    document: str
    registered_at: str | None
    notebooks: list[dict[str, Any]]
    next_cursor: str | None
    activity: dict[str, tuple[int, str | None]]
    total: int = 0  # the document's own list: how many pass the query, on all pages
    query: NotebookQuery = NotebookQuery()


def _with_times(host: Host, owner: str, notebooks: list[dict[str, Any]]) -> None:
    """A forgotten notebook's real end, which the listing leaves out: when it was forgotten."""
    for notebook in notebooks:
        if notebook["state"] in ("purged", "empty"):
            notebook["purged_at"] = host.notebook(owner, notebook["id"]).purged_at


def landing_view(
    host: Host, owner: str, cursor: str | None
) -> tuple[list[DocumentNotebooks], str | None]:
    """One page of the owner's documents, each with its newest notebooks; the next cursor."""
    listed = host.list_documents(owner, DOCUMENTS_PAGE_SIZE, cursor)
    pages = [
        (row, host.list_notebooks(owner, row["document"], None, NOTEBOOKS_SHOWN))
        for row in listed["documents"]
    ]
    shown = [notebook for _, notebooks in pages for notebook in notebooks["notebooks"]]
    _with_times(host, owner, shown)
    activity = host.notebook_activity(owner, [n["id"] for n in shown])  # one read for the page
    documents = [
        DocumentNotebooks(
            row["document"],
            row["registered_at"],
            notebooks["notebooks"],
            notebooks["next_cursor"],
            activity,
        )
        for row, notebooks in pages
    ]
    return documents, listed["next_cursor"]


def document_notebooks(
    host: Host, owner: str, document: str, query: NotebookQuery | None = None
) -> DocumentNotebooks:
    """One page of one document's own list, as ``query`` asks; ``not_found`` unless the owner
    holds the document. The list reads up to ``MAX_NOTEBOOKS`` of its notebooks to find and
    order them."""
    query = NotebookQuery() if query is None else query
    host.check_document(owner, document)
    state = {"open": "open", "expired": "expired"}.get(query.state or "")
    every: list[dict[str, Any]] = []
    cursor = None
    while len(every) < MAX_NOTEBOOKS:
        listed = host.list_notebooks(owner, document, state, 200, cursor)
        every += listed["notebooks"]
        cursor = listed["next_cursor"]
        if cursor is None:
            break
    if query.state == "forgotten":
        every = [n for n in every if n["state"] in ("purged", "empty")]
    if query.search is not None:
        every = [n for n in every if query.search in n["run"].casefold()]
    activity: dict[str, tuple[int, str | None]] = {}
    if query.order == "active":
        activity = host.notebook_activity(owner, [n["id"] for n in every])
        every.sort(key=lambda n: activity.get(n["id"], (0, None))[1] or "", reverse=True)
    last = max(1, -(-len(every) // NOTEBOOKS_PAGE_SIZE))
    query = replace(query, page=min(query.page, last))
    start = (query.page - 1) * NOTEBOOKS_PAGE_SIZE
    shown = every[start : start + NOTEBOOKS_PAGE_SIZE]
    _with_times(host, owner, shown)
    if query.order != "active":
        activity = host.notebook_activity(owner, [n["id"] for n in shown])
    return DocumentNotebooks(document, None, shown, None, activity, len(every), query)


def _landing_url(chrome: Chrome, **query: str) -> str:
    return f"{chrome.base}/panel/notebooks" + (f"?{urlencode(query)}" if query else "")


def render_landing(
    chrome: Chrome, documents: list[DocumentNotebooks], next_cursor: str | None, now: datetime
) -> str:
    """The page: one section per document (by name), its newest notebooks or "No notebook
    yet", a link to its own list when it has more, and a link to the next documents."""
    if not documents:
        body = (
            f"<h1>{_TITLE}</h1>"
            '<p class="notice" role="status">No documents yet. Register one and open a notebook'
            " for an agent run from a shell (<code>oh document put --owner YOU DOC</code>, then"
            " <code>oh notebook open --owner YOU --document DOC --run RUN</code>), or over the"
            " HTTP API.</p>"
        )
        return page(chrome, _TITLE, body)
    sections = "".join(_document_section(chrome, document, now) for document in documents)
    more = ""
    if next_cursor is not None:
        more = (
            f'<p class="more"><a href="{esc(_landing_url(chrome, cursor=next_cursor))}">'
            "More documents</a></p>"
        )
    return page(chrome, _TITLE, f"<h1>{_TITLE}</h1>{sections}{more}")


def _document_section(chrome: Chrome, document: DocumentNotebooks, now: datetime) -> str:
    registered = (
        f'<p class="meta">Registered {time_tag(document.registered_at)}</p>'
        if document.registered_at
        else ""
    )
    if document.notebooks:
        content = _table(chrome, document, now)
    else:
        content = (
            '<p class="empty">No notebook yet. An agent run gets one when your host opens it'
            f" (<code>oh notebook open --owner YOU --document {esc(document.document)}"
            " --run RUN</code>).</p>"
        )
    more = ""
    if document.next_cursor is not None:
        link = _landing_url(chrome, document=document.document)
        more = (
            f'<p class="more"><a href="{esc(link)}">All notebooks of'
            f" {esc(document.document)}</a> (search them by run, state and last write)</p>"
        )
    return (
        f'<section class="document" aria-label="Document {esc(document.document)}">'
        f"<h2>{esc(document.document)}</h2>{registered}{content}{more}</section>"
    )


def _find_form(chrome: Chrome, document: DocumentNotebooks) -> str:
    query = document.query
    states = '<option value="">Any state</option>' + "".join(
        f'<option value="{key}"{" selected" if key == query.state else ""}>{label}</option>'
        for key, label in _FILTER_STATES.items()
    )
    orders = "".join(
        f'<option value="{key}"{" selected" if key == query.order else ""}>{label}</option>'
        for key, label in _ORDERS.items()
    )
    action = esc(f"{chrome.base}/panel/notebooks")
    clear = (
        f' <a href="{esc(_landing_url(chrome, document=document.document))}">Clear</a>'
        if query.search or query.state or query.order != "newest"
        else ""
    )
    return (
        f'<form method="get" action="{action}" class="filter" role="search"'
        ' aria-label="Find a notebook">'
        f'<input type="hidden" name="document" value="{esc(document.document)}">'
        '<label for="find-q">Run contains</label>'
        f'<input id="find-q" name="q" type="search" maxlength="120" spellcheck="false"'
        f' value="{esc(query.search or "")}">'
        f'<label for="find-state">State</label><select id="find-state" name="state">{states}'
        "</select>"
        f'<label for="find-order">Order</label><select id="find-order" name="order">{orders}'
        f'</select><button type="submit">Find</button>{clear}</form>'
    )


def _document_pager(chrome: Chrome, document: DocumentNotebooks) -> str:
    query, total = document.query, document.total
    pages = max(1, -(-total // NOTEBOOKS_PAGE_SIZE))
    first = (query.page - 1) * NOTEBOOKS_PAGE_SIZE + 1
    shown = (
        f'<p class="count">Showing {first:,}–{first + len(document.notebooks) - 1:,} of'
        f" {total:,} notebooks.</p>"
        if total
        else ""
    )

    def to(number: int) -> str:
        items = [("document", document.document), *query.items(page=number)]
        return f"{chrome.base}/panel/notebooks?{urlencode(items)}"

    return shown + pager("Pages of notebooks", query.page, pages, to, current="")


def render_document(chrome: Chrome, document: DocumentNotebooks, now: datetime) -> str:
    """One document's own list: every notebook, found by run and state, in the order asked."""
    name = document.document
    title = f"Notebooks of {name}"
    if document.notebooks:
        content = _table(chrome, document, now)
    elif document.query.search or document.query.state:
        content = '<p class="empty">No notebook matches.</p>'
    else:
        content = '<p class="empty">No notebook yet.</p>'
    body = (
        f'<p class="back"><a href="{esc(_landing_url(chrome))}">All documents</a></p>'
        f'<section class="document" aria-label="Document {esc(name)}">'
        f'<h1>Notebooks of <span class="sub">{esc(name)}</span></h1>'
        f"{_find_form(chrome, document)}{_document_pager(chrome, document)}{content}</section>"
    )
    return page(chrome, title, body)


def _table(chrome: Chrome, document: DocumentNotebooks, now: datetime) -> str:
    rows = "".join(
        _row(chrome, notebook, document.activity.get(notebook["id"]), now)
        for notebook in document.notebooks
    )
    return (
        '<table><thead><tr><th scope="col">Run</th><th scope="col">State</th>'
        '<th scope="col">Notes</th><th scope="col">Last written</th>'
        '<th scope="col">Started</th><th scope="col">Ends</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _row(
    chrome: Chrome,
    notebook: dict[str, Any],
    activity: tuple[int, str | None] | None,
    now: datetime,
) -> str:
    link = f"{chrome.base}/panel/notebooks/{notebook['id']}"
    state = notebook["state"]
    if state == "open":
        ends = (
            f"forgets {time_tag(notebook['forgets_at'])}"
            f" ({esc(remaining(notebook['forgets_at'], now))})"
        )
    elif state in ("purged", "empty"):
        purged = notebook.get("purged_at")
        ends = f"forgotten {time_tag(purged)}" if purged else "forgotten"
    elif state == "expired":
        ends = f"expired {time_tag(notebook['forgets_at'])}"
    else:
        ends = time_tag(notebook["forgets_at"])
    gone = state in ("purged", "empty")
    notes, written = activity if activity is not None and not gone else (None, None)
    notes_html = "—" if notes is None else f"{notes:,}"
    written_html = time_tag(written) if written else ("—" if gone else "not yet")
    return (
        f'<tr class="notebook {esc(state)}">'
        f'<td><a href="{esc(link)}">{esc(notebook["run"])}</a></td>'
        f'<td><span class="badge">{esc(_STATES.get(state, state))}</span></td>'
        f'<td class="number">{notes_html}</td><td>{written_html}</td>'
        f"<td>{time_tag(notebook['started_at'])}</td><td>{ends}</td></tr>"
    )
