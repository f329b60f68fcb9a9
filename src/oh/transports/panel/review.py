"""The review page (docs/panel.md): pending proposals to accept (optionally edited) or reject,
decided proposals with who, when and why, and the reviewed knowledge by revision.

A decided proposal shows what the decision made: the accepted record (and, when accepted with
edits, what changed from the proposal), or the rejected proposal. A pending proposal that can
no longer be accepted as proposed (a pack installed since) says why, and offers only what can
succeed."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from oh.core.records import CONTENT_KEYS, Record
from oh.core.reviewed import Proposal, ReviewedRecord, Revision
from oh.errors import InvalidArgument
from oh.transports.panel.layout import (
    Chrome,
    esc,
    hidden_csrf,
    hidden_in,
    hidden_warning,
    locator_text,
    page,
    pager,
    time_tag,
)

if TYPE_CHECKING:
    from oh.host import Host

__all__ = ["DECIDED_PAGE_SIZE", "MAX_BULK", "ReviewView", "render_review", "review_view"]

DECIDED_PAGE_SIZE = 50  # decided proposals on one page of the Decided list
MAX_BULK = 100  # proposals one decision of several may name

_STATES = {"accept": "accepted", "accept_with_edits": "accepted with edits", "reject": "rejected"}


@dataclass(frozen=True, slots=True)
class ReviewView:
    pending: list[Proposal]
    decided: list[Proposal]
    revision: int  # the revision shown
    latest: int
    records: list[dict[str, Any]]
    revisions: list[Revision]
    decided_now: Proposal | None = None
    # proposal id → the reviewed version its acceptance made
    accepted: dict[str, ReviewedRecord] = field(default_factory=dict)
    # pending proposal id → why it cannot be accepted as proposed now
    refusals: dict[str, InvalidArgument] = field(default_factory=dict)
    decided_page: int = 1  # the page of the Decided list shown
    decided_total: int = 0  # how many are decided in all
    decided_now_count: int = 0  # how many proposals the decision just made decided


def review_view(
    host: Host,
    owner: str,
    revision: int | None = None,
    decided_id: str | None = None,
    decided_page: int = 1,
    decided_count: int = 1,
) -> ReviewView:
    proposals = host.proposals(owner)
    knowledge = host.knowledge_at(owner, revision)
    pending = [p for p in proposals if p.state == "pending"]
    decided = [p for p in proposals if p.state != "pending"]
    decided.sort(key=lambda p: p.decision.at if p.decision else "", reverse=True)
    total = len(decided)
    last_page = max(1, -(-total // DECIDED_PAGE_SIZE))
    decided_page = min(decided_page, last_page)
    start = (decided_page - 1) * DECIDED_PAGE_SIZE
    decided = decided[start : start + DECIDED_PAGE_SIZE]
    accepted: dict[str, ReviewedRecord] = {}
    for name in sorted({p.name for p in decided if p.state == "accepted"}):
        for version in host.history(owner, name):
            if version.proposal_id is not None:
                accepted[version.proposal_id] = version
    check = host.reviewable(owner)
    refusals: dict[str, InvalidArgument] = {}
    for proposal in pending:
        try:
            check(Record.parse(proposal.verified_record()))
        except InvalidArgument as exc:
            refusals[proposal.id] = exc
    return ReviewView(
        pending=pending,
        decided=decided,
        revision=knowledge["revision"],
        latest=knowledge["latest"],
        records=sorted(knowledge["records"], key=lambda r: (-r["revision"], r["name"])),
        revisions=list(reversed(host.revisions(owner))),
        decided_now=next((p for p in proposals if p.id == decided_id), None),
        accepted=accepted,
        refusals=refusals,
        decided_page=decided_page,
        decided_total=total,
        decided_now_count=decided_count,
    )


def _source(proposal: Proposal) -> str:
    source = proposal.source
    return (
        '<figure class="source"><blockquote>'
        f"<p>{esc(source.passage)}</p></blockquote>"
        f"<figcaption>Cited: {esc(source.document)}, {esc(locator_text(source.locator))}"
        f"</figcaption></figure>{hidden_warning(source.passage, locator_text(source.locator))}"
    )


def _origin(chrome: Chrome, proposal: Proposal) -> str:
    note = proposal.note
    if note is None:
        return "a new record"
    link = f"{esc(chrome.base)}/panel/notebooks/{esc(note.get('notebook'))}"
    return (
        f"the working note by {esc(note.get('author'))} at version {esc(note.get('version'))}"
        f' of <a href="{link}#record-{esc(note.get("name"))}">its notebook</a>'
    )


def _record_body(record: dict[str, Any]) -> str:
    links = []
    for key, label in (
        ("depends_on", "Depends on"),
        ("supports", "Supports"),
        ("contradicts", "Contradicts"),
    ):
        if record.get(key):
            links.append(f"<dt>{label}</dt><dd>{esc(', '.join(record[key]))}</dd>")
    fields = record.get("fields") or {}
    fields_html = (
        f'<details class="fields"><summary>Fields</summary><pre>'
        f"{esc(json.dumps(fields, indent=2, ensure_ascii=False))}</pre></details>"
        if fields
        else ""
    )
    links_html = f'<dl class="links">{"".join(links)}</dl>' if links else ""
    text = record.get("text", "")
    warning = hidden_warning(text, json.dumps(fields, ensure_ascii=False) if fields else "")
    return f'<p class="text">{esc(text)}</p>{warning}{fields_html}{links_html}'


def _refusal(refusal: InvalidArgument | None) -> tuple[str, bool]:
    """What a pending proposal that cannot be accepted as proposed says, and whether the
    page's one edit (the text) could make it acceptable."""
    if refusal is None:
        return "", True
    rule = refusal.details.get("rule")
    if rule == "reviewed.text":
        then = "Give it text to accept it, or reject it."
    elif rule == "profile.kind":
        then = "An edit keeps its name, and so its kind: it can only be rejected."
    else:
        then = (
            "This page edits only the text: accept it with fields that fit through the HTTP"
            " API (a decision with a record), or reject it."
        )
    return (
        f'<p class="notice error refusal" role="note"><strong>Cannot be accepted as'
        f" proposed:</strong> {esc(refusal.message)}. {then}</p>",
        rule == "reviewed.text",
    )


def _pending(
    chrome: Chrome,
    proposal: Proposal,
    refusal: InvalidArgument | None = None,
    pickable: bool = False,
) -> str:
    record = proposal.verified_record()
    key = f"proposal-{esc(proposal.id)}"
    action = f"{esc(chrome.base)}/panel/review/{esc(proposal.id)}/decision"
    why_not, acceptable = _refusal(refusal)
    accept = ""
    if acceptable and hidden_in(record.get("text", "")):
        # A text box would show the text as a browser does, reordered: what is accepted is
        # exactly the text shown above, with its marks, or nothing.
        accept = (
            '<p class="detail">Because of its hidden characters, this text cannot be edited'
            " here: Accept stores exactly the text shown above (each mark being the character"
            " it names). Reject it, or accept it with edits through the HTTP API.</p>"
        )
    elif acceptable:
        accept = (
            f'<label for="{key}-text">Text to accept (edit it to accept with edits)</label>'
            f'<textarea id="{key}-text" name="text" rows="4" maxlength="4000">'
            f"\n{esc(record.get('text', ''))}</textarea>"
        )
    accept_button = (
        '<button type="submit" name="decision" value="accept">Accept</button> '
        if acceptable
        else ""
    )
    # Ticked, the proposal is one of those the decision of several (above the list) decides.
    pick = (
        f'<p class="pick"><input type="checkbox" form="bulk" name="proposal"'
        f' value="{esc(proposal.id)}" id="{key}-pick">'
        f' <label for="{key}-pick">Select {esc(proposal.name)}</label></p>'
        if pickable
        else ""
    )
    return (
        f'<li><article class="proposal" id="{key}" aria-labelledby="{key}-title">'
        f'<h3 id="{key}-title" class="name">{esc(proposal.name)}</h3>{pick}'
        f'<p class="meta">Proposed by {esc(proposal.proposed_by)} · '
        f"{time_tag(proposal.proposed_at)} · from {_origin(chrome, proposal)}"
        f' · digest <code title="{esc(proposal.digest)}">{esc(proposal.digest[:12])}</code></p>'
        f"{_record_body(record)}{_source(proposal)}{why_not}"
        f'<form method="post" action="{action}" class="stack decision">{hidden_csrf(chrome)}'
        f"{accept}"
        f'<label for="{key}-reason">Reason for your decision</label>'
        f'<input id="{key}-reason" name="reason" required maxlength="2000">'
        f'<div class="actions">{accept_button}'
        '<button type="submit" name="decision" value="reject" class="danger">Reject</button>'
        "</div></form></article></li>"
    )


def _value(key: str, record: dict[str, Any]) -> str:
    value = record.get(key)
    if key == "text":
        return f'<span class="text">{esc(value)}</span>' if value else "<em>(empty)</em>"
    if key == "fields":
        return f"<code>{esc(json.dumps(value or {}, ensure_ascii=False))}</code>"
    return esc(", ".join(value)) if value else "<em>(none)</em>"


def _edits(proposed: dict[str, Any], accepted: dict[str, Any]) -> str:
    """What an acceptance with edits changed from the proposal, key by key."""
    rows = "".join(
        f"<dt>{esc(key)}</dt><dd>"
        f'<p class="was"><span class="label">Proposed:</span> {_value(key, proposed)}</p>'
        f'<p class="now"><span class="label">Accepted:</span> {_value(key, accepted)}</p></dd>'
        for key in CONTENT_KEYS
        if proposed.get(key) != accepted.get(key)
    )
    return (
        f'<div class="edits"><p class="detail">What the reviewer changed from the proposal:</p>'
        f'<dl class="edits">{rows}</dl></div>'
    )


def _decided(proposal: Proposal, accepted: ReviewedRecord | None = None) -> str:
    decision = proposal.decision
    key = f"proposal-{esc(proposal.id)}"
    verdict = "" if decision is None else _STATES.get(decision.decision, decision.decision)
    revision = f" · revision {esc(proposal.revision)}" if proposal.revision is not None else ""
    who = (
        ""
        if decision is None
        else (
            f'<p class="decision">{esc(verdict.capitalize())} by {esc(decision.by)} · '
            f"{time_tag(decision.at)}{revision}<br>Reason: {esc(decision.reason)}</p>"
            f"{hidden_warning(decision.reason)}"
        )
    )
    if proposal.discarded:
        body = (
            '<p class="detail">The proposed text was discarded when it was rejected: the'
            " decision is kept, the text is in no copy of your knowledge base from then on.</p>"
        )
    elif accepted is None:
        # Rejected (or an acceptance whose version cannot be found): what was proposed.
        body = f'<div class="proposed-record">{_record_body(proposal.verified_record())}</div>'
    else:
        proposed = proposal.verified_record()
        content = accepted.verified_content()
        body = f'<div class="accepted-record">{_record_body(content)}</div>'
        if accepted.digest != proposal.digest:
            body += _edits(proposed, content)
    return (
        f'<li><article class="proposal {esc(proposal.state)}" id="{key}"'
        f' aria-labelledby="{key}-title">'
        f'<h3 id="{key}-title" class="name">{esc(proposal.name)}'
        f' <span class="badge">{esc(verdict)}</span></h3>'
        f"{who}"
        f'<p class="meta">Proposed by {esc(proposal.proposed_by)} · '
        f"{time_tag(proposal.proposed_at)}</p>"
        f"{body}{_source(proposal)}"
        "</article></li>"
    )


def _knowledge(chrome: Chrome, view: ReviewView) -> str:
    base = esc(chrome.base)
    if view.records:
        rows = "".join(
            f'<li><article class="record reviewed" id="knowledge-{esc(r["name"])}"'
            f' aria-labelledby="knowledge-{esc(r["name"])}-title">'
            f'<h3 id="knowledge-{esc(r["name"])}-title" class="name">{esc(r["name"])}</h3>'
            f'<p class="meta">revision {esc(r["revision"])} · <span class="kind">'
            f'{esc(r["kind"])}</span> · digest <code title="{esc(r["digest"])}">'
            f"{esc(r['digest'][:12])}</code> · by {esc(r['author'])} · "
            f"{time_tag(r['written_at'])}</p>"
            f"{_record_body(r)}"
            f'<p class="detail">Source: {esc(r["source"]["document"])},'
            f" {esc(locator_text(r['source']['locator']))} · decided by"
            f" {esc(r['decision']['by'])}: {esc(r['decision']['reason'])}</p>"
            "</article></li>"
            for r in view.records
        )
        records = f'<ul class="records" role="list">{rows}</ul>'
    else:
        records = '<p class="empty">No reviewed knowledge at this revision.</p>'
    revisions = "".join(
        f"<li>Revision {rev.revision}: {esc(rev.what)}"
        + (f" {esc(rev.name)}" if rev.name else "")
        + f" · by {esc(rev.made_by)} · {time_tag(rev.made_at)}</li>"
        for rev in view.revisions
    )
    revisions_html = (
        f'<details class="revisions"><summary>All revisions ({len(view.revisions)})</summary>'
        f'<ol reversed class="versions">{revisions}</ol></details>'
        if view.revisions
        else ""
    )
    return (
        '<section id="knowledge" aria-labelledby="knowledge-title">'
        '<h2 id="knowledge-title">Reviewed knowledge</h2>'
        f'<p class="caption">At revision <strong data-field="revision">{view.revision}</strong>'
        f" (latest {view.latest}), newest revision first.</p>"
        f'<form method="get" action="{base}/panel/review" class="inline revision-picker">'
        '<label for="revision">Show revision</label> '
        f'<input id="revision" name="revision" type="number" min="0" max="{view.latest}"'
        f' value="{view.revision}" inputmode="numeric"> <button type="submit">Show</button>'
        f"</form>{records}{revisions_html}</section>"
    )


def _bulk(chrome: Chrome, view: ReviewView) -> str:
    """One decision for several pending proposals: the ones ticked, with one reason."""
    if len(view.pending) < 2:
        return ""
    action = f"{esc(chrome.base)}/panel/review/decisions"
    return (
        f'<form method="post" action="{action}" id="bulk" class="bulk"'
        ' aria-label="Decide the selected proposals">'
        f"{hidden_csrf(chrome)}"
        "<p>Tick proposals below to decide them together, as proposed, with one reason"
        f" (at most {MAX_BULK} at a time).</p>"
        '<label for="bulk-reason">Reason for the selected</label>'
        '<input id="bulk-reason" name="reason" required maxlength="2000">'
        '<div class="actions">'
        '<button type="submit" name="decision" value="accept">Accept the selected</button>'
        '<button type="submit" name="decision" value="reject" class="danger">'
        "Reject the selected</button></div></form>"
    )


def _decided_pager(chrome: Chrome, view: ReviewView) -> str:
    base = f"{chrome.base}/panel/review"
    return pager(
        "Pages of decided proposals",
        view.decided_page,
        max(1, -(-view.decided_total // DECIDED_PAGE_SIZE)),
        lambda n: f"{base}?decided_page={n}#decided" if n > 1 else f"{base}#decided",
        ("Newest", "Newer", "Older", "Oldest"),
        current="",
    )


def render_review(chrome: Chrome, view: ReviewView) -> str:
    notice = ""
    decided = view.decided_now
    if decided is not None and decided.decision is not None:
        what = _STATES.get(decided.decision.decision, "decided")
        at = f" at revision {decided.revision}" if decided.revision is not None else ""
        others = view.decided_now_count - 1
        more = f" and {others} more, {what}" if others > 0 else ""
        following = " The next proposal is here." if view.pending else ""
        # Fixed at the bottom of the window: the page opens at the next proposal, not the top.
        notice = (
            f'<p class="notice ok floating" role="status"><strong>{esc(decided.name)}</strong>:'
            f" {what}{at}{more}.{following}</p>"
        )
    pickable = len(view.pending) > 1
    pending_items = "".join(
        _pending(chrome, p, view.refusals.get(p.id), pickable) for p in view.pending
    )
    pending = (
        f'{_bulk(chrome, view)}<ul class="records" role="list">{pending_items}</ul>'
        if view.pending
        else '<p class="empty">No proposals wait for review.</p>'
    )
    decided_items = "".join(_decided(p, view.accepted.get(p.id)) for p in view.decided)
    first = (view.decided_page - 1) * DECIDED_PAGE_SIZE + 1
    showing = (
        f'<p class="count">Showing {first:,}–{first + len(view.decided) - 1:,} of'
        f" {view.decided_total:,}, the latest decision first.</p>"
        if view.decided
        else ""
    )
    decided_html = (
        f'{showing}<ul class="records" role="list">{decided_items}</ul>'
        if view.decided
        else '<p class="empty">No decisions yet.</p>'
    )
    body = (
        "<h1>Review</h1>"
        f"{notice}"
        '<section id="pending" aria-labelledby="pending-title">'
        f'<h2 id="pending-title">Pending proposals ({len(view.pending)})</h2>'
        '<p class="caption">Working notes proposed as reviewed knowledge, with the passage they'
        " cite. Accepting makes a new revision of your knowledge base.</p>"
        f"{pending}</section>"
        '<section id="decided" aria-labelledby="decided-title">'
        f'<h2 id="decided-title">Decided ({view.decided_total})</h2>{decided_html}'
        f"{_decided_pager(chrome, view)}</section>"
        f"{_knowledge(chrome, view)}"
    )
    return page(chrome, "Review", body)
