"""The Memory panel of one notebook (docs/panel.md): the session, its two lists, history, conflicts.

Anchors: a working note is ``#record-<name>`` (what memory cards link to); a reviewed record in
view is ``#reviewed-<name>``, since a note and a reviewed record may share a name.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from oh.core.canonical import matches_digest
from oh.core.notebook import Notebook
from oh.core.records import CONTENT_KEYS, Record
from oh.core.reviewed import Proposal, find_conflicts
from oh.errors import InvalidArgument
from oh.panel.layout import Chrome, esc, hidden_csrf, locator_text, page, remaining, time_tag

if TYPE_CHECKING:
    from oh.host import Host

__all__ = [
    "HistoryItem",
    "NotebookView",
    "RecordView",
    "anchor",
    "notebook_view",
    "render_forget_confirmation",
    "render_notebook",
]

NOTES_CAPTION = "Private notes the agent wrote for itself in this session"
REVIEWED_CAPTION = "Reviewed knowledge the agent can read here but not change"
LINK_LABELS = (
    ("depends_on", "Depends on"),
    ("supports", "Supports"),
    ("contradicts", "Contradicts"),
)
ORIGIN_WORDS = {"note": "working note", "reviewed": "reviewed record"}


def anchor(origin: str, name: str) -> str:
    """The element id of a record in the panel: ``record-<name>`` or ``reviewed-<name>``."""
    return ("record-" if origin == "note" else "reviewed-") + name


@dataclass(frozen=True, slots=True)
class HistoryItem:
    label: str  # e.g. "version 3 · replaced" or "revision 2 · accepted with edits"
    who: str
    when: str
    digest: str | None
    text: str | None
    detail: str = ""


@dataclass(slots=True)
class RecordView:
    origin: str  # note | reviewed
    record: dict[str, Any]  # the read shape of docs/tools.md
    history: list[HistoryItem] = field(default_factory=list)
    conflicts_with: list[str] = field(default_factory=list)
    proposals: list[Proposal] = field(default_factory=list)
    newer_revision: int | None = None  # reviewed: a later version exists outside the pin
    # notes: the pending proposal for this name (from this note or elsewhere), and why review
    # would refuse the note's content now; with either, the panel offers no "Propose"
    pending: Proposal | None = None
    refusal: str | None = None

    @property
    def name(self) -> str:
        return str(self.record["name"])


@dataclass(slots=True)
class NotebookView:
    notebook: Notebook
    notes: list[RecordView]
    reviewed: list[RecordView]
    now: datetime
    proposed: Proposal | None = None

    @property
    def gone(self) -> bool:
        return self.notebook.state in ("purged", "empty")

    def target(self, name: str, prefer: str) -> str | None:
        """The anchor a link to ``name`` goes to: the same list first, then the other."""
        present = {
            "note": {r.name for r in self.notes},
            "reviewed": {r.name for r in self.reviewed},
        }
        other = "reviewed" if prefer == "note" else "note"
        for origin in (prefer, other):
            if name in present[origin]:
                return anchor(origin, name)
        return None


_OPS = {"add": "added", "replace": "replaced", "remove": "removed"}
_DECISIONS = {"accept": "accepted", "accept_with_edits": "accepted with edits"}


def _note_histories(host: Host, owner: str, notebook_id: str) -> dict[str, list[HistoryItem]]:
    histories: dict[str, list[HistoryItem]] = {}
    for entry in host.notebook_log(owner, notebook_id):
        for change in entry.changes:
            text = None
            detail = ""
            if change.content is not None:
                if not matches_digest(change.content, change.digest):
                    detail = "this version does not match its digest"
                else:
                    text = json.loads(change.content).get("text")
            histories.setdefault(change.name, []).append(
                HistoryItem(
                    f"version {entry.version} · {_OPS.get(change.op, change.op)}",
                    entry.author,
                    entry.written_at,
                    change.digest,
                    text,
                    detail,
                )
            )
    return histories


def notebook_view(
    host: Host, owner: str, notebook_id: str, proposed_id: str | None = None
) -> NotebookView:
    """Everything the panel shows for one notebook, as its owner (another owner: not_found)."""
    notebook = host.notebook(owner, notebook_id)
    now = host.clock()
    proposals = host.proposals(owner)
    proposed = next((p for p in proposals if p.id == proposed_id), None)
    if notebook.state in ("purged", "empty"):
        return NotebookView(notebook, [], [], now, proposed)
    records = host.records(owner, notebook_id)
    histories = _note_histories(host, owner, notebook_id)
    by_note: dict[str, list[Proposal]] = {}
    for proposal in proposals:
        if proposal.note is not None and proposal.note.get("notebook") == notebook_id:
            by_note.setdefault(str(proposal.note.get("name")), []).append(proposal)
    pending = {p.name: p for p in proposals if p.state == "pending"}
    check = host.reviewable(owner)  # what proposing would check, profiles read once
    notes = []
    for record in records["notes"]:
        view = RecordView(
            "note",
            record,
            histories.get(record["name"], []),
            proposals=by_note.get(record["name"], []),
            pending=pending.get(record["name"]),
        )
        try:
            check(Record.parse({key: record[key] for key in CONTENT_KEYS}))
        except InvalidArgument as exc:
            view.refusal = exc.message
        notes.append(view)
    reviewed = []
    for record in records["reviewed"]:
        view = RecordView("reviewed", record)
        for version in host.history(owner, record["name"]):
            if notebook.pinned_revision is not None and version.revision > notebook.pinned_revision:
                view.newer_revision = version.revision
                continue
            decision = version.decision
            view.history.append(
                HistoryItem(
                    f"revision {version.revision} · "
                    f"{_DECISIONS.get(decision.decision, decision.decision)}",
                    decision.by,
                    decision.at,
                    version.digest,
                    version.verified_content().get("text"),
                    f"Reason: {decision.reason}",
                )
            )
        reviewed.append(view)
    conflicts = find_conflicts(
        {r.name: (r.record["digest"], r.record["contradicts"]) for r in notes},
        {r.name: (r.record["digest"], r.record["contradicts"]) for r in reviewed},
    )
    for view in (*notes, *reviewed):
        view.conflicts_with = conflicts.get((view.origin, view.name), [])
    return NotebookView(notebook, notes, reviewed, now, proposed)


# -- rendering -------------------------------------------------------------------------------


def _link(view: NotebookView, name: str, prefer: str) -> str:
    target = view.target(name, prefer)
    if target is None:
        return f'<span class="missing" title="not in view">{esc(name)}</span>'
    return f'<a href="#{esc(target)}">{esc(name)}</a>'


def _links(view: NotebookView, record: RecordView) -> str:
    rows = []
    for key, label in LINK_LABELS:
        names = record.record.get(key) or []
        if names:
            items = ", ".join(_link(view, name, record.origin) for name in names)
            rows.append(f"<dt>{label}</dt><dd>{items}</dd>")
    return f'<dl class="links">{"".join(rows)}</dl>' if rows else ""


def _conflict(view: NotebookView, record: RecordView) -> str:
    if not record.conflicts_with:
        return ""
    items = []
    for name in record.conflicts_with:
        if name == record.name:
            other = "reviewed" if record.origin == "note" else "note"
            items.append(
                f'<a href="#{esc(anchor(other, name))}">the {ORIGIN_WORDS[other]} of the same'
                f" name</a> (different digest)"
            )
        else:
            items.append(_link(view, name, record.origin))
    return (
        '<p class="conflict-flag"><strong>In conflict</strong> with '
        + ", ".join(items)
        + ". Both stay visible; neither is merged or hidden.</p>"
    )


def _history(record: RecordView) -> str:
    if not record.history:
        return ""
    items = []
    for item in reversed(record.history):
        digest = (
            f' · digest <code title="{esc(item.digest)}">{esc(item.digest[:12])}</code>'
            if item.digest
            else ""
        )
        text = f'<p class="text">{esc(item.text)}</p>' if item.text is not None else ""
        detail = f'<p class="detail">{esc(item.detail)}</p>' if item.detail else ""
        items.append(
            f'<li><p class="meta"><strong>{esc(item.label)}</strong> · by {esc(item.who)}'
            f" · {time_tag(item.when)}{digest}</p>{text}{detail}</li>"
        )
    count = len(record.history)
    noun = "version" if count == 1 else "versions"
    newer = (
        f'<p class="detail">A newer reviewed version exists at revision {record.newer_revision};'
        " this session is pinned before it.</p>"
        if record.newer_revision is not None
        else ""
    )
    return (
        f'<details class="history" id="{esc(anchor(record.origin, record.name))}-history">'
        f"<summary>History ({count} {noun})</summary>{newer}"
        f'<ol reversed class="versions">{"".join(items)}</ol></details>'
    )


def _source_and_decision(record: dict[str, Any]) -> str:
    source = record.get("source") or {}
    decision = record.get("decision") or {}
    what = _DECISIONS.get(decision.get("decision", ""), decision.get("decision", ""))
    return (
        '<figure class="source"><blockquote>'
        f"<p>{esc(source.get('passage', ''))}</p></blockquote>"
        f"<figcaption>Source: {esc(source.get('document', ''))}, "
        f"{esc(locator_text(source.get('locator', '')))}</figcaption></figure>"
        f'<p class="decision">Review: {esc(what)} by {esc(decision.get("by", ""))} · '
        f"{time_tag(str(decision.get('at', '')))} · revision {esc(record.get('revision', ''))}"
        f"<br>Reason: {esc(decision.get('reason', ''))}</p>"
    )


def _propose_form(chrome: Chrome, view: NotebookView, record: RecordView) -> str:
    status = ""
    if record.proposals:
        latest = record.proposals[-1]
        status = (
            f'<p class="proposal-state">Proposed for review: <strong>{esc(latest.state)}</strong>'
            f' (<a href="{esc(chrome.base)}/panel/review#proposal-{esc(latest.id)}">'
            "review page</a>)</p>"
        )
    if view.notebook.state != "open" and view.notebook.state != "expired":
        return status
    # Offer "Propose" only where proposing can make a proposal; otherwise say why not.
    pending = record.pending
    if pending is not None:
        note = pending.note or {}
        if note.get("notebook") == view.notebook.id and note.get("name") == record.name:
            return status  # this note's own proposal waits: its state says so
        return (
            f'{status}<p class="propose-blocked">Cannot be proposed for review now: another'
            f" proposal for {esc(record.name)} waits for review"
            f' (<a href="{esc(chrome.base)}/panel/review#proposal-{esc(pending.id)}">'
            "review page</a>); decide it first.</p>"
        )
    if record.refusal is not None:
        return (
            f'{status}<p class="propose-blocked">Cannot be proposed for review:'
            f" {esc(record.refusal)}.</p>"
        )
    key = esc(anchor("note", record.name))
    action = f"{esc(chrome.base)}/panel/notebooks/{esc(view.notebook.id)}/proposals"
    return (
        f'{status}<details class="propose" id="{key}-propose"><summary>Propose for review'
        "</summary>"
        f'<form method="post" action="{action}" class="stack">{hidden_csrf(chrome)}'
        f'<input type="hidden" name="name" value="{esc(record.name)}">'
        "<p>Reviewed knowledge needs a source: the document this note cites, the exact"
        " passage, and where it stands.</p>"
        f'<label for="{key}-document">Cited document</label>'
        f'<input id="{key}-document" name="document" required maxlength="200"'
        f' value="{esc(view.notebook.document)}">'
        f'<label for="{key}-passage">Exact passage</label>'
        f'<textarea id="{key}-passage" name="passage" required maxlength="4000" rows="4">'
        "\n</textarea>"
        f'<label for="{key}-locator">Locator (page, section or offset)</label>'
        f'<input id="{key}-locator" name="locator" required maxlength="200"'
        ' placeholder="p. 4, §2">'
        '<button type="submit">Propose for review</button></form></details>'
    )


def _forget_note_form(chrome: Chrome, view: NotebookView, record: RecordView) -> str:
    """Forget this one note (a logged change the owner authors), while the notebook is open."""
    if view.notebook.state != "open":
        return ""
    action = f"{esc(chrome.base)}/panel/notebooks/{esc(view.notebook.id)}/notes/forget"
    return (
        f'<form method="post" action="{action}" class="inline forget-note">{hidden_csrf(chrome)}'
        f'<input type="hidden" name="name" value="{esc(record.name)}">'
        f'<button type="submit" aria-label="Forget the note {esc(record.name)}">'
        "Forget this note</button></form>"
    )


def _record(chrome: Chrome, view: NotebookView, record: RecordView) -> str:
    data = record.record
    key = esc(anchor(record.origin, record.name))
    digest = str(data["digest"])
    stamp = (
        f"version {esc(data.get('version'))}"
        if record.origin == "note"
        else f"revision {esc(data.get('revision'))}"
    )
    fields = data.get("fields") or {}
    fields_html = (
        f'<details class="fields"><summary>Fields</summary><pre>'
        f"{esc(json.dumps(fields, indent=2, ensure_ascii=False))}</pre></details>"
        if fields
        else ""
    )
    classes = f"record {record.origin}" + (" conflict" if record.conflicts_with else "")
    extra = (
        _propose_form(chrome, view, record) + _forget_note_form(chrome, view, record)
        if record.origin == "note"
        else _source_and_decision(data)
    )
    return (
        f'<li><article class="{classes}" id="{key}" aria-labelledby="{key}-title">'
        f'<h3 id="{key}-title" class="name">{esc(record.name)}</h3>'
        f'<p class="meta"><span class="kind">{esc(data["kind"])}</span>'
        f' · digest <code title="{esc(digest)}">{esc(digest[:12])}</code>'
        f" · by {esc(data.get('author', ''))} · {time_tag(str(data.get('written_at', '')))}"
        f" · {stamp}</p>"
        f"{_conflict(view, record)}"
        f'<p class="text">{esc(data.get("text", ""))}</p>'
        f"{fields_html}{_links(view, record)}{_history(record)}{extra}"
        "</article></li>"
    )


def _list(
    chrome: Chrome, view: NotebookView, key: str, title: str, caption: str, items: list[RecordView]
) -> str:
    if items:
        content = (
            f'<ul class="records" role="list">'
            f"{''.join(_record(chrome, view, r) for r in items)}</ul>"
        )
    else:
        empty = "No working notes." if key == "notes" else "No reviewed knowledge in view."
        content = f'<p class="empty">{empty}</p>'
    return (
        f'<section id="{key}" aria-labelledby="{key}-title" aria-describedby="{key}-caption">'
        f'<h2 id="{key}-title">{title}</h2>'
        f'<p class="caption" id="{key}-caption">{caption}</p>{content}</section>'
    )


def _session(chrome: Chrome, view: NotebookView) -> str:
    nb = view.notebook
    pinned = "none" if nb.pinned_revision is None else str(nb.pinned_revision)
    base = esc(chrome.base)
    forget = (
        ""
        if view.gone
        else (
            f'<form method="get" action="{base}/panel/notebooks/{esc(nb.id)}/forget"'
            ' class="forget"><button type="submit" class="danger">Forget now</button></form>'
        )
    )
    countdown = (
        f' <span class="countdown" data-until="{esc(nb.forgets_at)}">'
        f"({esc(remaining(nb.forgets_at, view.now))})</span>"
        if not view.gone
        else ""
    )
    return (
        '<section id="session" aria-labelledby="session-title">'
        '<h2 id="session-title" class="visually-hidden">Session</h2>'
        '<dl class="session">'
        f"<div><dt>Document</dt><dd>{esc(nb.document)}</dd></div>"
        f"<div><dt>Run</dt><dd>{esc(nb.run)}</dd></div>"
        f"<div><dt>Session started</dt><dd>{time_tag(nb.started_at)}</dd></div>"
        f"<div><dt>Forgets</dt><dd>{time_tag(nb.forgets_at)}{countdown}</dd></div>"
        f'<div><dt>Memory version</dt><dd data-field="version">{nb.version}</dd></div>'
        f"<div><dt>Pinned revision</dt><dd>{esc(pinned)}</dd></div>"
        f'<div><dt>State</dt><dd data-field="state">{esc(nb.state)}</dd></div>'
        f"</dl>{forget}</section>"
    )


def _notices(chrome: Chrome, view: NotebookView) -> str:
    nb = view.notebook
    out = []
    if view.gone:
        when = f" at {time_tag(nb.purged_at)}" if nb.purged_at else ""
        out.append(
            f'<p class="notice gone" role="status">This session\'s memory is gone: it was'
            f" forgotten{when}. Its notes, log and answers were deleted, and every later tool"
            " call of the agent answers <code>purged</code>. Reviewed knowledge stays in your"
            f' knowledge base (<a href="{esc(chrome.base)}/panel/review">Review</a>).</p>'
        )
    elif nb.state == "expired":
        out.append(
            '<p class="notice" role="status">This session has expired and waits for the purge;'
            " the agent can no longer use it.</p>"
        )
    if view.proposed is not None:
        out.append(
            f'<p class="notice ok" role="status">Proposed <strong>{esc(view.proposed.name)}'
            f"</strong> for review. Decide it on the"
            f' <a href="{esc(chrome.base)}/panel/review#proposal-{esc(view.proposed.id)}">'
            "review page</a>.</p>"
        )
    return "".join(out)


def render_notebook(chrome: Chrome, view: NotebookView) -> str:
    nb = view.notebook
    base = esc(chrome.base)
    body = (
        f'<h1>Memory <span class="sub">for {esc(nb.document)}</span></h1>'
        f"{_session(chrome, view)}"
        '<p id="live" class="visually-hidden" role="status" aria-live="polite"></p>'
        f'<div id="memory" data-version="{nb.version}" data-state="{esc(nb.state)}">'
        f"{_notices(chrome, view)}"
        f"{_list(chrome, view, 'notes', 'Working notes', NOTES_CAPTION, view.notes)}"
        f"{_list(chrome, view, 'reviewed', 'Reviewed knowledge in view', REVIEWED_CAPTION, view.reviewed)}"  # noqa: E501
        "</div>"
    )
    attrs = (
        f' data-notebook="{esc(nb.id)}"'
        f' data-state-url="{base}/panel/notebooks/{esc(nb.id)}/state"'
        f' data-events-url="{base}/v1/notebooks/{esc(nb.id)}/events"'
    )
    return page(chrome, f"Memory · {nb.document}", body, main_attrs=attrs)


def render_forget_confirmation(chrome: Chrome, notebook: Notebook) -> str:
    base = esc(chrome.base)
    panel = f"{base}/panel/notebooks/{esc(notebook.id)}"
    body = (
        '<section aria-labelledby="confirm-title" class="confirm">'
        '<h1 id="confirm-title">Forget this session\'s memory now?</h1>'
        f"<p>Document <strong>{esc(notebook.document)}</strong>, run"
        f" <strong>{esc(notebook.run)}</strong>. The agent's working notes, their log and"
        " history are deleted at once and cannot be brought back. The agent's later tool calls"
        " answer <code>purged</code>. Reviewed knowledge is not affected.</p>"
        f'<form method="post" action="{panel}/forget" class="actions">{hidden_csrf(chrome)}'
        '<input type="hidden" name="confirm" value="yes">'
        '<button type="submit" class="danger">Yes, forget now</button>'
        f' <a href="{panel}" class="button">Cancel, keep it</a></form></section>'
    )
    return page(chrome, "Forget now?", body)
