"""The owner's way in: their documents, each with its notebooks linking to their Memory panels.

``GET /`` sends a browser here (``/panel/notebooks``); an owner who is not signed in gets the
sign-in form first. The page lists the owner's registered documents by name, a page at a time
(the host's ``list_documents``), each with its newest notebooks (``list_notebooks`` on that
document) — a document without any notebook yet says so. ``?document=DOC`` is one document's
own list: all its notebooks, newest first, a page at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from oh.panel.layout import Chrome, esc, page, remaining, time_tag

if TYPE_CHECKING:
    from oh.host import Host

__all__ = [
    "DOCUMENTS_PAGE_SIZE",
    "NOTEBOOKS_PAGE_SIZE",
    "NOTEBOOKS_SHOWN",
    "DocumentNotebooks",
    "document_notebooks",
    "landing_view",
    "render_document",
    "render_landing",
]

DOCUMENTS_PAGE_SIZE = 50  # documents on one page of the landing page
NOTEBOOKS_SHOWN = 5  # a document's newest notebooks shown on the landing page
NOTEBOOKS_PAGE_SIZE = 100  # notebooks on one page of a document's own list

_STATES = {
    "open": "open",
    "expired": "expired, waiting for the purge",
    "purged": "forgotten",
    "empty": "forgotten",
    "opening": "opening",
}
_TITLE = "Your documents and notebooks"


@dataclass(frozen=True, slots=True)
class DocumentNotebooks:
    """One document as a page lists it: its newest notebooks, and whether it has more."""

    document: str
    registered_at: str | None
    notebooks: list[dict[str, Any]]
    next_cursor: str | None


def landing_view(
    host: Host, owner: str, cursor: str | None
) -> tuple[list[DocumentNotebooks], str | None]:
    """One page of the owner's documents, each with its newest notebooks; the next cursor."""
    listed = host.list_documents(owner, DOCUMENTS_PAGE_SIZE, cursor)
    documents = []
    for row in listed["documents"]:
        notebooks = host.list_notebooks(owner, row["document"], None, NOTEBOOKS_SHOWN)
        documents.append(
            DocumentNotebooks(
                row["document"],
                row["registered_at"],
                notebooks["notebooks"],
                notebooks["next_cursor"],
            )
        )
    return documents, listed["next_cursor"]


def document_notebooks(
    host: Host, owner: str, document: str, cursor: str | None
) -> DocumentNotebooks:
    """One page of one document's notebooks; ``not_found`` unless the owner holds it."""
    host.check_document(owner, document)
    listed = host.list_notebooks(owner, document, None, NOTEBOOKS_PAGE_SIZE, cursor)
    return DocumentNotebooks(document, None, listed["notebooks"], listed["next_cursor"])


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
        content = _table(chrome, document.notebooks, now)
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
            f" {esc(document.document)}</a></p>"
        )
    return (
        f'<section class="document" aria-label="Document {esc(document.document)}">'
        f"<h2>{esc(document.document)}</h2>{registered}{content}{more}</section>"
    )


def render_document(chrome: Chrome, document: DocumentNotebooks, now: datetime) -> str:
    """One document's own list: every notebook, newest first, and a link to older ones."""
    name = document.document
    title = f"Notebooks of {name}"
    if document.notebooks:
        content = _table(chrome, document.notebooks, now)
    else:
        content = '<p class="empty">No notebook yet.</p>'
    more = ""
    if document.next_cursor is not None:
        link = _landing_url(chrome, document=name, cursor=document.next_cursor)
        more = f'<p class="more"><a href="{esc(link)}">Older notebooks</a></p>'
    body = (
        f'<p class="back"><a href="{esc(_landing_url(chrome))}">All documents</a></p>'
        f'<section class="document" aria-label="Document {esc(name)}">'
        f'<h1>Notebooks of <span class="sub">{esc(name)}</span></h1>{content}{more}</section>'
    )
    return page(chrome, title, body)


def _table(chrome: Chrome, notebooks: list[dict[str, Any]], now: datetime) -> str:
    rows = "".join(_row(chrome, notebook, now) for notebook in notebooks)
    return (
        '<table><thead><tr><th scope="col">Run</th><th scope="col">State</th>'
        '<th scope="col">Started</th><th scope="col">Forgets</th></tr></thead>'
        f"<tbody>{rows}</tbody></table>"
    )


def _row(chrome: Chrome, notebook: dict[str, Any], now: datetime) -> str:
    link = f"{chrome.base}/panel/notebooks/{notebook['id']}"
    state = notebook["state"]
    if state == "open":
        forgets = (
            f"{time_tag(notebook['forgets_at'])} ({esc(remaining(notebook['forgets_at'], now))})"
        )
    elif state in ("purged", "empty"):
        forgets = "gone"
    else:
        forgets = time_tag(notebook["forgets_at"])
    return (
        f'<tr class="notebook {esc(state)}">'
        f'<td><a href="{esc(link)}">{esc(notebook["run"])}</a></td>'
        f'<td><span class="badge">{esc(_STATES.get(state, state))}</span></td>'
        f"<td>{time_tag(notebook['started_at'])}</td><td>{forgets}</td></tr>"
    )
