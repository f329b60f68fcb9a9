"""The owner's way in: their notebooks, grouped by document, each linking to its Memory panel.

``GET /`` sends a browser here (``/panel/notebooks``); an owner who is not signed in gets the
sign-in form first. The list is the host's ``list_notebooks``, newest first, a page at a time.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from urllib.parse import quote

from oh.panel.layout import Chrome, esc, page, remaining, time_tag

__all__ = ["render_notebooks"]

_STATES = {
    "open": "open",
    "expired": "expired, waiting for the purge",
    "purged": "forgotten",
    "empty": "forgotten",
    "opening": "opening",
}


def render_notebooks(chrome: Chrome, listed: dict[str, Any], now: datetime) -> str:
    """The page: one section per document (in the order of its newest notebook), a row per
    notebook with its run, state, start and forget times, and a link to older notebooks."""
    base = esc(chrome.base)
    documents: dict[str, list[dict[str, Any]]] = {}
    for notebook in listed["notebooks"]:
        documents.setdefault(notebook["document"], []).append(notebook)
    if not documents:
        body = (
            "<h1>Your notebooks</h1>"
            '<p class="notice" role="status">No notebooks yet. An agent run gets one when your'
            " host opens it (<code>oh notebook open --owner YOU --document DOC --run RUN</code>"
            " from a shell).</p>"
        )
        return page(chrome, "Your notebooks", body)
    sections = []
    for document, notebooks in documents.items():
        rows = "".join(_row(chrome, notebook, now) for notebook in notebooks)
        sections.append(
            f'<section class="document" aria-label="Document {esc(document)}">'
            f"<h2>{esc(document)}</h2>"
            '<table><thead><tr><th scope="col">Run</th><th scope="col">State</th>'
            '<th scope="col">Started</th><th scope="col">Forgets</th></tr></thead>'
            f"<tbody>{rows}</tbody></table></section>"
        )
    more = ""
    if listed["next_cursor"] is not None:
        more = (
            f'<p><a href="{base}/panel/notebooks?cursor={quote(listed["next_cursor"])}">'
            "Older notebooks</a></p>"
        )
    body = "<h1>Your notebooks</h1>" + "".join(sections) + more
    return page(chrome, "Your notebooks", body)


def _row(chrome: Chrome, notebook: dict[str, Any], now: datetime) -> str:
    link = f"{esc(chrome.base)}/panel/notebooks/{esc(quote(notebook['id']))}"
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
        f'<tr class="notebook {esc(state)}"><td><a href="{link}">{esc(notebook["run"])}</a></td>'
        f'<td><span class="badge">{esc(_STATES.get(state, state))}</span></td>'
        f"<td>{time_tag(notebook['started_at'])}</td><td>{forgets}</td></tr>"
    )
